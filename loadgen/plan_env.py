"""A setting as the run's programs read it (loadgen/plan.py and the
runners): from the environment, else .env's default (FROM_ENV), checked
against its form; a bad one is a SettingError naming it with its value."""
import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class SettingError(Exception):
    """A bad setting, named with its value: the runner's exit 2."""


def read_testid(env):
    """TESTID, the run's folder name under results/."""
    testid = setting(env, "TESTID", "")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", testid):
        raise SettingError(f'TESTID="{testid}": use letters, digits, . _ -')
    return testid


# A setting's default is .env's, the one place for it: FROM_ENV. In the
# generator's container compose passes every setting from .env itself; the
# tests and a run by hand read .env with scripts/dotenv.sh, its one reader.
FROM_ENV = object()
DOTENV = ROOT / "scripts" / "dotenv.sh"


@cache
def dotenv():
    """.env's values, where the checkout is at hand (not in a container)."""
    if not DOTENV.exists():
        return {}
    res = subprocess.run(["sh", str(DOTENV)], cwd=ROOT, capture_output=True, text=True)
    if res.returncode:
        raise SettingError(f".env: {res.stderr.strip()}")
    return dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)


def setting(env, name, default):
    """The setting's value; unset or empty, its default (FROM_ENV: .env's)."""
    v = env.get(name, "")
    if v != "" or default is not FROM_ENV:
        return default if v == "" else v
    v = dotenv().get(name, "")
    if v == "":
        raise SettingError(f"{name}: empty, and .env gives no value to fall back on")
    return v


def whole(env, name, default, minimum):
    raw = setting(env, name, default if default is FROM_ENV else str(default))
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum:
        raise SettingError(f'{name}="{raw}": must be a whole number >= {minimum}')
    return int(raw)


def one_of(env, name, default, known):
    v = setting(env, name, default)
    if v not in known:
        raise SettingError(f'{name}="{v}": must be one of {", ".join(known)}')
    return v


def choices(env, name, default, known):
    items = [s.strip() for s in setting(env, name, default).split(",") if s.strip()]
    if not items:
        raise SettingError(f"{name}: empty")
    for item in items:
        if item not in known:
            raise SettingError(f'{name}: unknown "{item}" (known: {", ".join(known)})')
    if len(set(items)) != len(items):
        raise SettingError(f"{name}: {','.join(items)} names one twice")
    return items


def percent(env, name):
    """A percentage ("5" or "5%"), above 0 and below 100, or None when unset."""
    raw = setting(env, name, "")
    if raw == "":
        return None
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)%?", raw)
    if not m or not 0 < float(m.group(1)) < 100:
        raise SettingError(f'{name}="{raw}": must be a percentage above 0 and below 100, e.g. 5%')
    return float(m.group(1))


def rising(env, name, default):
    """A rising comma list of whole numbers >= 1."""
    raw = setting(env, name, default)
    items = [x.strip() for x in raw.split(",") if x.strip()]
    ok = items and all(re.fullmatch(r"[0-9]+", x) and int(x) >= 1 for x in items)
    if not ok or [int(x) for x in items] != sorted({int(x) for x in items}):
        unit = "req/s" if name == "SWEEP_RATES" else "connections"
        raise SettingError(f'{name}="{raw}": must be rising whole numbers >= 1 ({unit}), e.g. 100,200,400')
    return [int(x) for x in items]


def first_round(env):
    """FIRST_ROUND: where a later batch of a PRECISION run starts (1: the run itself)."""
    return whole(env, "FIRST_ROUND", 1, 1)
