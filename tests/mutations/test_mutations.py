"""The mutation list cannot go stale unseen: every mutation's text is in its
file exactly once (what mutate.py checks before it runs any), and every
mutation names a test command. Seconds, in make test; the mutations
themselves run on demand (make mutate)."""
import mutate


def test_every_mutation_is_in_its_file_once():
    stale = []
    for m in mutate.load():
        try:
            mutate.locate(m)
        except mutate.Refused as e:
            stale.append(str(e))
    assert not stale, "\n".join(stale)


def test_every_mutation_names_a_known_test_or_a_command():
    doc = mutate.tomllib.loads(mutate.LIST.read_text())
    for m in doc["mutation"]:
        assert m["test"] in doc["tests"] or " " in m["test"], f"{m['id']}: test {m['test']!r} is neither a name nor a command"
