"""Peak memory of preparing one large image for the model (issue 32, 9d).

A 79-megapixel PNG (just under the 80 MP cap) once took a gateway from 97 to 1,004 MiB: the
decoded picture (4 bytes a pixel in Pillow, alpha or not) was copied twice at full size
(orientation, then the mode conversion) before it was made small. Each case runs in a fresh
child process so its peak is its own: the child imports what the gateway imports for an
image, reports its resident memory, prepares the image as the media step does, and reports
its peak (VmHWM of /proc/self/status: this process's own, unlike `ru_maxrss`,
which keeps the parent's figure across fork and exec; Linux only).

    python bench/image_memory.py [--code /path/to/a/checkout]

`--code` measures another checkout's `gateway` (for example main, for the figure before a
change). Data: generated here, flat colour images (small files, full-size decodes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from PIL import Image
from gateway.agent.media.images import prepare_image

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

before = status("VmHWM")
prepared = prepare_image(Path(sys.argv[2]), Path(sys.argv[3]), "anthropic", 80_000_000)
peak = status("VmHWM")
print(json.dumps({"before": before, "peak": peak,
                  "size": [prepared.width, prepared.height]}))
"""

CASES = [  # name, mode, size, format
    ("79 MP PNG, RGB", "RGB", (8888, 8888), "PNG"),
    ("79 MP PNG, RGBA", "RGBA", (8888, 8888), "PNG"),
    ("79 MP PNG, palette", "P", (8888, 8888), "PNG"),
    ("79 MP JPEG", "RGB", (8888, 8888), "JPEG"),
    ("24 MP PNG, RGB", "RGB", (6000, 4000), "PNG"),
]


def _make(folder: Path, name: str, mode: str, size: tuple[int, int], fmt: str) -> Path:
    from PIL import Image

    path = folder / (name.replace(" ", "_").replace(",", "") + "." + fmt.lower())
    colour = {"RGB": (10, 200, 30), "RGBA": (10, 200, 30, 100), "P": 3}[mode]
    Image.new(mode, size, colour).save(path, fmt)  # type: ignore[arg-type]
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="the checkout whose gateway package is measured"
    )
    args = parser.parse_args()
    print(f"code: {args.code}")
    print(f"{'image':<22} {'before MiB':>10} {'peak MiB':>9} {'added MiB':>10}  sent as")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, mode, size, fmt in CASES:
            source = _make(folder, name, mode, size, fmt)
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.code), str(source), str(folder / "seen")],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout)
            print(
                f"{name:<22} {row['before']:>10.0f} {row['peak']:>9.0f} "
                f"{row['peak'] - row['before']:>10.0f}  {row['size'][0]}x{row['size'][1]}"
            )


if __name__ == "__main__":
    main()
