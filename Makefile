# Two commands matter: `make run` and `make test`. Everything they need is installed here, nothing by hand.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORPUS ?= ../shared/corpus
# Debian libraries Qt needs to run offscreen (measured on these machines), on a real X desktop (the xcb platform
# plugin refuses to load without them), and what the tests use to start the real window under a virtual X server
# (and to switch that desktop's colour scheme on a private session bus).
QT_DEBS := libglib2.0-0 libgl1 libegl1 libxkbcommon0 libfontconfig1 libfreetype6 libdbus-1-3
XCB_DEBS := libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-render-util0 libxcb-image0 \
	libxcb-randr0 libxkbcommon-x11-0
TEST_DEBS := xvfb xauth xdotool dbus-daemon libglib2.0-bin
DEBS := $(QT_DEBS) $(XCB_DEBS) $(TEST_DEBS)
STAMP := $(VENV)/.installed

.PHONY: run test lint setup debs screenshots bench fuzz monkey clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory debs
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# Installs missing Debian packages when running as root; otherwise prints the exact command and fails, so a window
# that cannot start is reported here rather than as Qt's "no Qt platform plugin could be initialized".
debs:
	@command -v dpkg-query >/dev/null || { echo "note: not a Debian system; Qt needs the equivalents of: $(DEBS)"; exit 0; }; \
	missing=""; for p in $(DEBS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Qt libraries:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "error: Qt needs these Debian packages; install them with:"; \
	    echo "  sudo apt-get install -y$$missing"; exit 1; fi; \
	fi

run: $(STAMP)
	$(BIN)/layout-inspector gui --sample

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check inspector tests bench tools
	$(BIN)/mypy

test: $(STAMP) lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q --rootdir=. -c pyproject.toml --corpus=$(CORPUS)

screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python tools/screenshots.py --corpus $(CORPUS)
	QT_QPA_PLATFORM=offscreen $(BIN)/python tools/screenshots_edit.py --corpus $(CORPUS)

bench: $(STAMP)
	$(BIN)/python bench/run.py --corpus $(CORPUS)

fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz --cases 10000 --corpus $(CORPUS)

# seeded random real input on the window: 20 seeds x 300 steps, each seed in a child process (docs/GUI_TESTING.md)
monkey: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.gui_monkey --seeds 1-20 --steps 300 --corpus $(CORPUS)

clean:
	rm -rf $(VENV) build *.egg-info
