"""SGLang's frontend language (sglang.lang: gen, select, fork, roles) against a running server.
Run as `python sglang_frontend_script.py URL` by test_sglang_frontend.py, in a process of its own:
SGLang's package is imported the way tests/oracle/chat/sglang_parsers.py does (the serving
stack's torch & co. replaced by inert stubs; the frontend never calls them). Prints one JSON
object with every program's results."""
import json
import pathlib
import sys

IP_REGEX = r"((25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)"
CITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "population": {"type": "integer", "minimum": 0, "maximum": 100000000},
        "is_capital": {"type": "boolean"},
    },
    "required": ["name", "population", "is_capital"],
    "additionalProperties": False,
}


def main(url):
    # SGLang's package is imported here, never at module level: importing this module (the test
    # reads its constants) must not install the stubs into the test process.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle" / "chat"))
    import sglang_parsers

    sglang_parsers.load()
    import sglang.lang.api as sgl
    from sglang.lang.backend.runtime_endpoint import RuntimeEndpoint

    @sgl.function
    def regex_program(s):
        s += "Q: What is the IP address of the Google DNS servers?\nA: "
        s += sgl.gen("ip", max_tokens=24, temperature=0, regex=IP_REGEX)

    @sgl.function
    def json_program(s):
        s += "Describe Paris in JSON:\n"
        s += sgl.gen("city", max_tokens=96, temperature=0, json_schema=json.dumps(CITY))

    @sgl.function
    def select_program(s):
        s += "Q: Is the sky blue on a clear day? Answer yes or no.\nA: "
        s += sgl.select("answer", choices=["yes", "no"])

    @sgl.function
    def fork_program(s):
        s += "Two facts about cats:\n"
        forks = s.fork(2)
        for i, f in enumerate(forks):
            f += f"{i + 1}. "
            f += sgl.gen("fact", max_tokens=12, temperature=0, stop="\n")
        forks.join()
        s += "First: " + forks[0]["fact"] + "\nSecond: " + forks[1]["fact"]

    @sgl.function
    def chat_program(s):
        s += sgl.system("You are a helpful assistant.")
        s += sgl.user("Name a color.")
        s += sgl.assistant(sgl.gen("first", max_tokens=12, temperature=0))
        s += sgl.user("Name another one.")
        s += sgl.assistant(sgl.gen("second", max_tokens=12, temperature=0))

    sgl.set_default_backend(RuntimeEndpoint(url))
    out = {}
    out["ip"] = regex_program.run()["ip"]
    out["city"] = json_program.run()["city"]
    state = select_program.run()
    out["answer"] = state["answer"]
    out["answer_meta"] = state.get_meta_info("answer") is not None
    state = fork_program.run()
    out["facts"] = [state.text()]
    state = chat_program.run()
    out["chat"] = {"first": state["first"], "second": state["second"],
                   "messages": state.messages()}
    batch = regex_program.run_batch([{}, {}, {}])
    out["batch_ips"] = [b["ip"] for b in batch]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
