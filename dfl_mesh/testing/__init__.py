"""The exactness kit: the checks dfl-mesh runs on its own protocols, for any registered protocol,
from a plugin package's own tests (docs/extending/protocol.md).

    from dfl_mesh.testing import (assert_formula_bits, assert_resume_exact,
                                  assert_transports_agree, audit_checkpoint_fields)

    def test_push_sum_is_exact():
        audit_checkpoint_fields("push-sum")
        assert_transports_agree("push-sum")
        assert_resume_exact("push-sum", kill_after_round=1)

Each check takes the protocol's registered name and, optionally, a topology and the run
settings of `dfl_mesh.run` (`rounds=`, `model=`, `dataset=`, hyper-parameters such as `lr=`,
`overrides=` for dotted keys); by default it runs four nodes whose degrees differ, three
rounds, a small MLP on synthetic data. Each raises AssertionError with a one-line reason that
names the differing file, tensor, field, link or round; a failing check keeps its runs (the
reason says where) unless `workdir=` put them somewhere already.

- `assert_transports_agree`: zmq against inproc, final files byte for byte.
- `assert_resume_exact`: a run killed (SIGKILL) after a round and resumed against an
  uninterrupted one: final files, ledgers, formula bits, metrics rows.
- `assert_formula_bits`: the formula ledger against the author's count per link and round, and
  charged exactly where data messages went.
- `audit_checkpoint_fields`: every value `run_round` changes that the checkpoint (the model and
  `checkpoint_fields`) does not save.
"""

from dfl_mesh.testing.audit import Audit, audit_checkpoint_fields
from dfl_mesh.testing.formula import FinishedRun, assert_formula_bits
from dfl_mesh.testing.mesh import DEFAULT_SETTINGS, KIT_TOPOLOGY
from dfl_mesh.testing.resume import assert_resume_exact
from dfl_mesh.testing.transports import assert_transports_agree

__all__ = ["DEFAULT_SETTINGS", "KIT_TOPOLOGY", "Audit", "FinishedRun", "assert_formula_bits",
           "assert_resume_exact", "assert_transports_agree", "audit_checkpoint_fields"]
