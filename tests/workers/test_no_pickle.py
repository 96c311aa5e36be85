"""The worker's refusal of pickles: plain data loads, any pickle that imports a name is refused,
by either unpickler and through joblib. In a subprocess: an audit hook cannot be removed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import io, pickle, collections
    import joblib
    from modelhost.errors import UnsafeArtifact
    from modelhost.workers.no_pickle import refuse_unpickling

    data = pickle.dumps({"rows": [1, 2.5, "x"]})
    importing = pickle.dumps(collections.OrderedDict(a=1))
    buffer = io.BytesIO()
    joblib.dump(collections.OrderedDict(a=1), buffer)
    refuse_unpickling()
    assert pickle.loads(data) == {"rows": [1, 2.5, "x"]}
    for load in (pickle.loads, lambda b: pickle._Unpickler(io.BytesIO(b)).load()):
        try:
            load(importing)
        except UnsafeArtifact as error:
            assert "collections.OrderedDict" in str(error), error
        else:
            raise SystemExit("an importing pickle was loaded")
    try:
        joblib.load(io.BytesIO(buffer.getvalue()))
    except UnsafeArtifact:
        print("refused")
    """
)


def test_importing_pickles_are_refused() -> None:
    """Plain data loads and every pickle importing a name is refused."""
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "refused"
