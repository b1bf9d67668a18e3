"""A child for MediaWorkers tests: answers with the environment it was started with."""

import json
import os
import sys

if __name__ == "__main__":
    sys.stdin.read()
    sys.stdout.write(json.dumps({"environ": dict(os.environ)}))
