use captchaai_engine::{ApiKey, Config, Output, Solve, Task};
const TASK: &str = r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://portal.example.com/export"}"#;
const REPLIES: [&[u8]; 5] = [
    br#"{"status":1,"request":73846221}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
    br#"{"status":1,"request":"03AGdBq24PBCbwiDRaS_MJ7Zxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
];
fn main() {
    let task = Task::from_json(TASK).unwrap();
    let key = ApiKey::new("0123456789abcdef0123456789abcdef").unwrap();
    let config = Config::default();
    let mut total = 0;
    for _ in 0..20000 {
        let mut solve = Solve::new(task.clone(), key.clone(), &config, 0).unwrap();
        let mut now = 0;
        let mut replies = REPLIES.iter();
        loop {
            match solve.poll_output(now).unwrap() {
                Output::Send(r) => solve.handle_response(now, r.id, 200, replies.next().unwrap()).unwrap(),
                Output::WaitUntil(t) => now = t,
                Output::Solved(s) => {
                    total += s.polls;
                    break;
                }
                Output::Failed(f) => panic!("{f}"),
            }
        }
    }
    println!("{total}");
}
