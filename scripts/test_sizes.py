"""scripts/sizes.py: no module of the lab over 400 lines and no function over
60, but those it names with the reason; and its count on a tree of its own."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sizes  # noqa: E402


def test_no_module_or_function_of_the_lab_over_its_limit():
    lines = sizes.problems()
    assert not lines, "\n".join(lines)


def test_the_count_names_each_module_and_function_over_and_each_stale_exemption(tmp_path):
    long_def = "def long():\n" + "    x = 1\n" * 60  # 61 lines
    (tmp_path / "a.py").write_text(long_def + "\n\ndef short():\n    pass\n")
    (tmp_path / "b.py").write_text("x = 1\n" * 401)
    (tmp_path / "ok.py").write_text("def f():\n" + "    x = 1\n" * 59)
    (tmp_path / "link.py").symlink_to(tmp_path / "b.py")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "big.py").write_text("x = 1\n" * 500)
    assert sizes.over(tmp_path) == {"a.py long": 61, "b.py": 401}
    assert sizes.problems(tmp_path, {"b.py": "generated", "gone.py": "split since"}) == [
        "a.py long: 61 lines, over 60: split it by responsibility (or name it in scripts/sizes.py's EXEMPT with "
        "the reason)",
        "gone.py: exempt in scripts/sizes.py (split since), but no longer over: take it out of EXEMPT"]
