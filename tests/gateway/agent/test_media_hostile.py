"""Hostile media at the unit level (issue 32, red-team round 3): what one file may cost the
gateway in memory, CPU and disk, and what its name may do to a reply."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_79_megapixel_png_is_prepared_with_one_full_size_copy(tmp_path):
    """The decoded picture (4 bytes a pixel) is the only full-size copy: peak memory grows by
    less than 1.5 times it. On main the whole picture was turned, converted and resized at
    full size: ~3 times it (a 79 MP PNG took ~940 MiB above idle)."""
    child = textwrap.dedent("""
        import sys
        from pathlib import Path
        from PIL import Image
        from gateway.agent.media.images import prepare_image

        def hwm():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

        source = Path(sys.argv[1])
        Image.new("RGBA", (8888, 8888), (10, 200, 30, 100)).save(source, "PNG")
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
        before = hwm()
        prepared = prepare_image(source, source.with_name("seen"), "anthropic", 80_000_000)
        print(hwm() - before, prepared.width, prepared.height)
    """)
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path / "big.png")],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    added, width, height = (int(v) for v in done.stdout.split())
    decoded = 8888 * 8888 * 4
    assert (width, height) == (1072, 1072)
    assert added < 1.5 * decoded, f"peak grew by {added / 2**20:.0f} MiB"
