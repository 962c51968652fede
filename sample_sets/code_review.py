"""A custom check of `code.jsonl` (`{"type": "python", "function":
"code_review:asserts_in_code"}`): lineup imports this module from beside the
set file, in a process of its own, and calls the function with the answer's
text, the case (a dict) and the answer's tool trace (a dict, or None)."""

import ast
import re

_BLOCK = re.compile(r"^```(?:python|py)?[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def asserts_in_code(answer, case, trace):
    """The answer's last Python block holds at least `min_asserts` assert
    statements (a case tag `asserts:N` sets it; default 3): counted in the
    parsed code, so the word "assert" in prose does not count. Score: the
    share of the asserts wanted."""
    wanted = next((int(t.split(":", 1)[1]) for t in case.get("tags", ()) if t.startswith("asserts:")), 3)
    blocks = _BLOCK.findall(answer)
    if not blocks:
        return {"passed": False, "score": 0.0, "reason": "no code block"}
    try:
        tree = ast.parse(blocks[-1])
    except SyntaxError as exc:
        return {"passed": False, "score": 0.0, "reason": f"the code does not parse (line {exc.lineno})"}
    found = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    return {"passed": found >= wanted, "score": min(found / wanted, 1.0),
            "reason": f"{found} assert statement(s) in the code ({wanted} wanted)"}
