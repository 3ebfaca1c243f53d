import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the independent oracle lives next to the tests


def pytest_collection_modifyitems(config, items):
    """Tests marked slow first (in their collected order), then the rest: with several xdist workers the long
    tests start early and the short ones fill the gaps, instead of one long test starting last on one worker."""
    items[:] = [i for i in items if i.get_closest_marker("slow")] + [i for i in items
                                                                     if not i.get_closest_marker("slow")]
