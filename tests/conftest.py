import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the independent oracle lives next to the tests
