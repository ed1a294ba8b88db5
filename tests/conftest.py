"pytest options and shared fixtures for ep_probing's tests: tests marked `cuda` need a CUDA GPU and run only with `pytest --cuda`."
import pytest

def pytest_addoption(parser):
    parser.addoption('--cuda', action='store_true', default=False,
                     help="run the tests marked cuda (they need a CUDA GPU); without it they are deselected, never skipped")

def pytest_configure(config):
    config.addinivalue_line('markers', 'cuda: needs a CUDA GPU; deselected unless pytest runs with --cuda')

def pytest_collection_modifyitems(config, items):
    "Deselect (not skip) the cuda tests unless `--cuda`: on CPU CI they neither pass nor show as skipped"
    if config.getoption('--cuda'): return
    drop = [it for it in items if it.get_closest_marker('cuda')]
    if not drop: return
    config.hook.pytest_deselected(items=drop)
    items[:] = [it for it in items if not it.get_closest_marker('cuda')]


@pytest.fixture
def stop_after_epoch_1(monkeypatch):
    "Ctrl-C once epoch 1 is checkpointed, in the next run only (test_trust_run, test_trust_run3)"
    from ep_probing.engine import Checkpoint
    save, state = Checkpoint.after_epoch, dict(armed=True)
    def after_epoch(self):
        save(self)
        if state['armed'] and self.epoch == 0: state['armed'] = False; raise KeyboardInterrupt
    monkeypatch.setattr(Checkpoint, 'after_epoch', after_epoch)
