"""A page in real headless Chromium over the DevTools protocol (``--remote-debugging-pipe``: JSON messages separated
by NUL bytes on file descriptors 3 and 4, no extra package): the errors it logs while loading, whether every
image embedded in it decodes, and what a reader sees in a window of a given size (a screenshot and the places of
the page's elements)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

#: Scans the page's HTML (the report keeps its results in scripts) for embedded PNGs and decodes each one.
IMAGES_JS = """
(async () => {
  const found = document.documentElement.innerHTML.match(/data:image\\/png[^,"]*;base64,[A-Za-z0-9+\\/=\\s]+/g) || [];
  const shown = Array.from(document.images).map(i => [i.complete, i.naturalWidth]);
  const decoded = await Promise.all(found.map(src => new Promise(done => {
    const image = new Image();
    image.onload = () => done(image.naturalWidth > 0);
    image.onerror = () => done(false);
    image.src = src.replace(/\\s/g, "");
  })));
  return JSON.stringify({embedded: found.length, decoded: decoded.filter(Boolean).length, shown: shown});
})()
"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class _Pipe:
    def __init__(self, binary: str):
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def wire():  # the browser reads commands on fd 3 and writes answers on fd 4 (copies first: either may be 3)
            reading, writing = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next = b"", 0
        self.events: list[dict] = []

    def send(self, method: str, session: str | None = None, timeout: float = 60, **params) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for answer in self._messages():
                if answer.get("id") == self._next:
                    if "error" in answer:
                        raise RuntimeError(f"{method}: {answer['error']}")
                    return answer["result"]
                self.events.append(answer)
        raise TimeoutError(f"chromium did not answer {method} within {timeout} s")

    def _messages(self):
        chunk = os.read(self._read, 1 << 20)
        if not chunk:
            raise RuntimeError("chromium closed its pipe")
        self._buffer += chunk
        *complete, self._buffer = self._buffer.split(b"\0")
        return [json.loads(m) for m in complete if m]

    def close(self):
        self.process.kill()
        self.process.wait()
        os.close(self._write)
        os.close(self._read)


def load_page(path: Path, settle: float = 3.0) -> dict:
    """Open ``path`` in headless Chromium; returns ``errors`` (exceptions, console errors, failed loads),
    ``embedded`` and ``decoded`` (PNGs found in the page and those that decode), ``shown`` ([complete, width] of
    each image on the first view)."""
    pipe = _Pipe(chromium())
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            pipe.send(f"{domain}.enable", session)
        pipe.send("Page.navigate", session, url=Path(path).resolve().as_uri())
        time.sleep(settle)
        result = pipe.send("Runtime.evaluate", session, expression=IMAGES_JS, awaitPromise=True, returnByValue=True)
        report = json.loads(result["result"]["value"])
    finally:
        pipe.close()
    errors = []
    for event in pipe.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(params["entry"].get("text", ""))
    return {"errors": errors, **report}


#: Where the report's decision sits in the window: the heading, each source's recommendation (its box and the width
#: its text needs), the recommendation's figure on show (its source, its box, whether it decoded), the tabs that
#: switch it, whether anything in the first screen is wider than the window, and the page's text.
LAYOUT_JS = """
(() => {
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,
                                                                  right: r.right, width: r.width}; };
  const heading = Array.from(document.querySelectorAll('h2')).find(h => h.textContent.trim() === 'The answer');
  const rows = Array.from(document.querySelectorAll('.decision')).map(row => {
    const cells = Array.from(row.querySelectorAll('td'));
    return {source: row.dataset.source, text: row.innerText, box: box(row),
            overflowing: cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText.slice(0, 80))};
  });
  const figures = Array.from(document.querySelectorAll('figure img'))
    .map(i => ({src: i.src.slice(0, 60), width: i.getBoundingClientRect().width}));
  const shown = Array.from(document.querySelectorAll('figure.recommended'))
    .filter(f => getComputedStyle(f).display !== 'none')
    .map(f => { const i = f.querySelector('img');
                return {source: f.dataset.source, box: box(i), decoded: i.complete && i.naturalWidth > 0}; });
  const tabs = Array.from(document.querySelectorAll('.tabs label')).map(l => ({source: l.dataset.source, box: box(l),
                                                                              selector: `label[for="${l.htmlFor}"]`}));
  return JSON.stringify({heading: heading ? box(heading) : null, rows: rows, figures: figures, shown: shown,
                         tabs: tabs, pageWidth: document.documentElement.scrollWidth, text: document.body.innerText});
})()
"""


def look(path: Path, width: int = 1400, height: int = 900, settle: float = 3.0, clicks: tuple[str, ...] = ()) -> dict:
    """Open ``path`` in headless Chromium in a ``width`` × ``height`` window: ``screenshot`` (PNG bytes of the first
    screen) and the layout of :data:`LAYOUT_JS` (``heading``, ``rows``, ``figures``, ``shown``, ``tabs``,
    ``pageWidth``, ``text``); then, for each CSS selector of ``clicks``, a click on that element as a reader makes it
    (without scrolling) and ``after``: the layout and screenshot it leaves, in order."""
    pipe = _Pipe(chromium())
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        pipe.send("Page.enable", session)
        pipe.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        pipe.send("Page.navigate", session, url=Path(path).resolve().as_uri())
        time.sleep(settle)

        def seen() -> dict:
            layout = pipe.send("Runtime.evaluate", session, expression=LAYOUT_JS, returnByValue=True)
            shot = pipe.send("Page.captureScreenshot", session, format="png")
            return {"screenshot": base64.b64decode(shot["data"]), **json.loads(layout["result"]["value"])}

        first, after = seen(), []
        for selector in clicks:
            _click(pipe, session, selector)
            time.sleep(0.3)
            after.append(seen())
    finally:
        pipe.close()
    return {**first, "after": after}


def _click(pipe: _Pipe, session: str, selector: str) -> None:
    """A mouse click (press and release) at the middle of the element ``selector`` where it is in the window."""
    where = pipe.send("Runtime.evaluate", session, returnByValue=True, expression=(
        f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        " return [r.left + r.width / 2, r.top + r.height / 2]; })()"))["result"]["value"]
    for kind in ("mousePressed", "mouseReleased"):
        pipe.send("Input.dispatchMouseEvent", session, type=kind, x=where[0], y=where[1], button="left", clickCount=1)
