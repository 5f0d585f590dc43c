"""CaptchaAI solving on the captchaai-engine WebAssembly component.

Every protocol decision (what to send, how long to wait, what a reply means, when to stop) is
made by the engine .wasm shipped in this package; the drivers here only move bytes and sleep.
Use only for portals you own or are licensed to automate.
"""

from .engine import Engine, Failed, Output, Send, Solved, SolveHandle, SolveTimes
from .errors import (
    CaptchaAIError,
    EngineMisuse,
    EngineTrap,
    Failure,
    FailureClass,
    FailureOrigin,
    PermanentError,
    SnapshotError,
    SolveTimesError,
    TransientError,
    UnsolvableError,
)
from .solver import AsyncSolver, Clock, PendingSolve, Solver
from .tasks import (
    TASK_TYPES,
    BlsTask,
    CaptchaFoxTask,
    CloudflareChallengeTask,
    FriendlyCaptchaTask,
    GeeTestTask,
    GeeTestV3Task,
    GeeTestV4Task,
    GridTask,
    ImageTask,
    LeminTask,
    RecaptchaV2EnterpriseTask,
    RecaptchaV2Task,
    RecaptchaV3EnterpriseTask,
    RecaptchaV3Task,
    Task,
    TurnstileTask,
)
from .types import Config, Request, RequestKind, Response, Solution, ThreadsInfo, TransportErrorKind

__version__ = "0.3.0"

__all__ = [
    "AsyncSolver", "BlsTask", "CaptchaAIError", "CaptchaFoxTask", "Clock", "CloudflareChallengeTask", "Config",
    "Engine", "EngineMisuse", "EngineTrap", "Failed", "Failure", "FailureClass", "FailureOrigin",
    "FriendlyCaptchaTask", "GeeTestTask", "GeeTestV3Task", "GeeTestV4Task", "GridTask", "ImageTask", "LeminTask",
    "Output", "PendingSolve", "PermanentError", "RecaptchaV2EnterpriseTask", "RecaptchaV2Task",
    "RecaptchaV3EnterpriseTask", "RecaptchaV3Task", "Request", "RequestKind", "Response", "Send", "SnapshotError",
    "Solution", "SolveHandle", "Solved", "SolveTimes", "SolveTimesError", "Solver", "Task", "TASK_TYPES", "ThreadsInfo",
    "TransientError", "TransportErrorKind", "TurnstileTask", "UnsolvableError",
]
