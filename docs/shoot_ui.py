"""Take the screenshots of docs/ui.md: ``a2a-tape ui`` over a fresh demo log, in headless Chromium.

    .venv/bin/python docs/shoot_ui.py      # rewrites docs/images/ui-*.png

Needs the test extra (Playwright) and Debian's Chromium (``/usr/bin/chromium``). The log is made
the way a newcomer makes theirs: ``a2a-tape demo`` twice, plus the golden recordings imported.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "images"
EXE = str(Path(sys.executable).with_name("a2a-tape"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def a2a_tape(*args: str) -> None:
    subprocess.run([EXE, *args], check=True, capture_output=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "demo.db")
        for tape in ("sdk-v10-stream", "sdk-boom", "sdk-input-required", "opencode-blocks"):
            a2a_tape("import", str(ROOT / "recordings" / f"{tape}.jsonl"), "--db", db)
        a2a_tape("demo", "--db", db)
        a2a_tape("demo", "--db", db)
        ui = subprocess.Popen([EXE, "ui", "--db", db, "--no-open"], stdout=subprocess.PIPE, text=True)
        try:
            assert ui.stdout is not None
            url = ui.stdout.readline().split(": ", 1)[1].strip()
            base = url.partition("/?token=")[0]
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=FLAGS
                )
                page = browser.new_page(viewport={"width": 1280, "height": 820})
                page.goto(url)
                page.wait_for_selector("#task-rows tr.task-row")
                page.screenshot(path=OUT / "ui-tasks.png")
                ids = page.locator("#task-rows tr.task-row td.id code").all_inner_texts()
                page.locator("#task-rows tr.task-row a").first.click()  # the newest: the second demo run
                page.wait_for_selector("#findings table, #findings p.ok")
                page.screenshot(path=OUT / "ui-task.png")
                page.locator("#scrub").fill("7")
                page.wait_for_selector("#scrub-label:has-text('after event 7 of')")
                page.locator("details.reasoning summary").click()
                page.locator("#scrubber").scroll_into_view_if_needed()
                page.screenshot(path=OUT / "ui-scrubber.png")
                page.locator("#events tr[data-position] details.item summary").nth(6).click()
                page.wait_for_selector("#events .raw-bytes")
                page.locator("#events .raw-bytes").first.scroll_into_view_if_needed()
                page.screenshot(path=OUT / "ui-raw.png")
                page.goto(f"{base}/diff?a={ids[0]}&b={ids[2]}")
                page.wait_for_selector(".diff.events")
                page.screenshot(path=OUT / "ui-diff.png")
                browser.close()
        finally:
            ui.terminate()
            ui.wait(timeout=30)
    for p in sorted(OUT.glob("ui-*.png")):
        print(f"wrote {p.relative_to(ROOT)} ({p.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
