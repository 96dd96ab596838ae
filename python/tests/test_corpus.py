# The embedded corpus is deterministic and has the advertised mix.
from libzs import corpus


def test_deterministic_and_mixed():
    a, ka = corpus.generate(500, seed=1)
    b, kb = corpus.generate(500, seed=1)
    assert a == b and ka == kb
    assert all(len(p) == 4096 for p in a)
    assert set(ka) == {k for k, _ in corpus.MIX}
    c, _ = corpus.generate(500, seed=2)
    assert c != a


def test_write(tmp_path):
    path = tmp_path / "c.bin"
    kinds = corpus.write(str(path), 50)
    assert path.stat().st_size == 50 * 4096 and len(kinds) == 50
