# unchecked: needs Mage and the CAPTCHAAI_API_KEY secret above; tests/integrations/test_mage_example.py runs this file
import pandas as pd

from captchaai_engine import TurnstileTask
from captchaai_engine.integrations.mage import solver_for_block

if 'data_loader' not in globals():
    from mage_ai.data_preparation.decorators import data_loader
if 'test' not in globals():
    from mage_ai.data_preparation.decorators import test

SITEKEY = '0x4AAAAAAABkMYinukE8nzY'  # the widget's data-sitekey


@data_loader
def log_in_to_portals(*args, **kwargs) -> pd.DataFrame:
    rows = []
    # The key from the Mage secret CAPTCHAAI_API_KEY; the Config from the variable captchaai_config.
    with solver_for_block(kwargs) as solver:
        for region in kwargs.get('regions') or ['north', 'south']:  # one at a time: one CaptchaAI thread
            solution = solver.solve(TurnstileTask(SITEKEY, f'https://portal.example.com/{region}/login'))
            # Post the login form with solution.answer here, at once: the token is single-use.
            rows.append({'region': region, 'captcha_task_id': solution.task_id,
                         'solved_in_ms': solution.elapsed_ms})
    return pd.DataFrame(rows)


@test
def test_output(output, *args) -> None:
    assert len(output) > 0 and output['captcha_task_id'].all(), 'no CaptchaAI task solved'
