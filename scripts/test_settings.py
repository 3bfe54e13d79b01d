"""scripts/settings.py: a bad table is refused naming the setting, a region
without its markers naming the file, and what it writes into .env reads back
the same through scripts/dotenv.sh (compose's rules)."""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import settings  # noqa: E402

GOOD = '''
[group.run]
title = "The run"

[setting.RATE]
group = "run"
type = "int"
default = "500"
min = 1
readers = ["load"]
compose = ["plan"]
doc = "requests per second"
'''


def load(tmp_path, text):
    p = tmp_path / "settings.toml"
    p.write_text(text)
    return settings.load(p)


def test_the_table_loads(tmp_path):
    assert load(tmp_path, GOOD)["settings"]["RATE"]["default"] == "500"


@pytest.mark.parametrize("old, new, named", [
    ('default = "500"', 'default = "0"', 'RATE: default "0" is outside >= 1'),
    ('default = "500"', 'default = "5x"', 'RATE: default "5x" is not a whole number'),
    ('default = "500"', 'default = ""', "RATE: default \"\" is empty"),
    ('min = 1', 'minimum = 1', "RATE: unknown field minimum"),
    ('readers = ["load"]', 'readers = ["lode"]', "RATE: readers must list"),
    ('group = "run"', 'group = "runs"', 'RATE: group "runs"'),
    ('doc = "requests per second"', 'row = "SEED"', "RATE: row = 'SEED'"),
    ('type = "int"', 'type = "enum"', "RATE: type enum needs choices"),
])
def test_a_bad_setting_is_named(tmp_path, old, new, named):
    with pytest.raises(settings.TableError, match=named.replace("(", r"\(")):
        load(tmp_path, GOOD.replace(old, new))


def test_regions(tmp_path):
    t = load(tmp_path, GOOD)
    regions = settings.compose_regions(t)
    text = "x:\n  env:\n    # >>> settings.toml: plan\n    OLD: 1\n    # <<< settings.toml: plan\n"
    assert settings.fill(text, "compose.yaml", regions, "") == \
        "x:\n  env:\n    # >>> settings.toml: plan\n    RATE: ${RATE}\n    # <<< settings.toml: plan\n"
    with pytest.raises(settings.TableError, match="compose.yaml: region plan has no end marker"):
        settings.fill(text.replace("<<< settings.toml: plan", "end"), "compose.yaml", regions, "")
    with pytest.raises(settings.TableError, match="compose.yaml: no region for plan"):
        settings.fill("x: 1\n", "compose.yaml", regions, "")
    with pytest.raises(settings.TableError, match="compose.yaml: region app is not one settings.toml writes"):
        settings.fill(text.replace("plan", "app"), "compose.yaml", regions, "")


def test_env_values_read_back_the_same(tmp_path):
    values = {"A": "plain", "B": "two words", "C": "a $dollar", "D": 'say "hi"', "E": "", "F": "x #y"}
    env = tmp_path / ".env"
    env.write_text("".join(f"{k}={settings.dotenv_value(k, v)}\n" for k, v in values.items()))
    out = subprocess.run(["sh", str(settings.ROOT / "scripts" / "dotenv.sh"), "-f", str(env)],
                         capture_output=True, text=True, check=True).stdout
    assert dict(line.split("=", 1) for line in out.splitlines()) == values
    with pytest.raises(settings.TableError, match="X: default has ' and"):
        settings.dotenv_value("X", "it's $5")
