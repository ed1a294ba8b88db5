"""The house without circles: no module-level import cycle among `ep_probing`'s modules, and no library module imports
the console layer `cli`. Read with `ast` (tests/module_map.py), never imported."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from module_map import module_map, cycles, importers  # noqa: E402

mm = module_map()


def test_the_map_reads_the_package():
    "The map sees the modules and their imports (a map of nothing would pass the tests below)"
    assert {'core', 'config', 'probes', 'zoo', 'cli', 'pipeline'} <= set(mm), sorted(mm)
    assert 'probes' in mm['zoo']['module_level'] and 'core' in mm['config']['module_level']
    assert 'pipeline' in mm['cli']['function_level']


def test_a_cycle_is_found():
    "The cycle finder finds a planted circle (and its members)"
    fake = {'a': {'module_level': ['b']}, 'b': {'module_level': ['c']}, 'c': {'module_level': ['a']},
            'd': {'module_level': ['a']}}
    assert cycles(fake) == [['a', 'b', 'c']]


def test_no_module_level_cycle():
    assert cycles(mm) == []


def test_no_library_module_imports_cli():
    "`cli` is the console layer: it imports the library (inside its commands), never the other way"
    assert importers(mm, 'cli') == {'module_level': [], 'function_level': []}
