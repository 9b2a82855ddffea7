"""The Metadata dock: denotations of each graph input/output, model-wide Image.* keys, other metadata_props, doc
string, producer and version, and the denotation checker's findings.

Every field shows the value the exported model will carry (TFLite metadata pre-fill, layout-derived denotations,
the user's edits on top) and says where it came from. Values are checked as typed against the ONNX vocabulary
(metadata_schema): a keystroke that cannot lead to an allowed value is refused, and the allowed values are shown.
Each accepted change is one undoable EditMetadata command.
"""
from __future__ import annotations

import html
from urllib.parse import quote

from PySide6.QtCore import QRegularExpression, Qt, QTimer, Signal
from PySide6.QtGui import QRegularExpressionValidator, QValidator
import shiboken6
from PySide6.QtWidgets import (QApplication, QComboBox, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPushButton, QScrollArea, QSizePolicy, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from inspector.core.metadata import schema as ms
from inspector.core.ir.errors import MetadataError
from inspector.core.io.onnx_reader import text_of
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.metadata.tflite import read_tflite_metadata      # here, not on the GUI thread mid-open
from inspector.core.session.events import FindingsChecked, ModelOpened, PlanChanged
from ..palette import css

NONE = "—"
IO_PAGE = 40                    # input/output rows built at a time (each a few combo boxes)
IO_SCAN = 5000                  # inputs/outputs read between two event-loop turns


class ChoiceValidator(QValidator):
    """Accepts an allowed value (any case), or a prefix of one while typing; anything else is refused."""
    refused = Signal(str)

    def __init__(self, allowed, parent=None):
        super().__init__(parent)
        self.allowed = [a.lower() for a in allowed] + ["", NONE.lower()]

    def validate(self, text, pos):
        low = text.strip().lower()
        if low in self.allowed:
            return QValidator.Acceptable, text, pos
        if any(a.startswith(low) for a in self.allowed):
            return QValidator.Intermediate, text, pos
        self.refused.emit(text)
        return QValidator.Invalid, text, pos


class ChoiceCombo(QComboBox):
    """An editable drop-down of allowed values; `committed` carries the canonical value ("" for none)."""
    committed = Signal(str)

    def __init__(self, allowed, what: str, parent=None):
        super().__init__(parent)
        self.allowed, self.what = tuple(allowed), what
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.NoInsert)
        self.setCompleter(None)
        self.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(7)             # narrow docks: no horizontal scrolling
        self.addItems([NONE, *self.allowed])
        self.validator_ = ChoiceValidator(self.allowed, self)
        self.lineEdit().setValidator(self.validator_)
        self.setToolTip(f"{what}: allowed values are {', '.join(self.allowed)}")
        self.value = ""
        # a refused keystroke is said here, beside the field (the caller places it), until the text changes
        self.refusal = QLabel(wordWrap=True, textFormat=Qt.PlainText)
        self.refusal.setStyleSheet(f"color:{css('error')}; font-size:11px")
        self.refusal.hide()
        self.validator_.refused.connect(self._refused)
        self.lineEdit().textChanged.connect(lambda _t: self.refusal.hide())
        self.activated.connect(lambda _i: self._commit())
        self.lineEdit().editingFinished.connect(self._commit)

    def _refused(self, text: str) -> None:
        self.refusal.setText(f"'{text}' refused: allowed values for {self.what} are {', '.join(self.allowed)}")
        self.refusal.show()

    def set_value(self, value: str) -> None:
        self.value = self._canonical(value) or ""
        self.blockSignals(True)
        self.setCurrentText(self.value or NONE)
        self.blockSignals(False)

    def _canonical(self, text: str) -> str | None:
        low = text.strip().lower()
        if low in ("", NONE.lower()):
            return ""
        return next((a for a in self.allowed if a.lower() == low), None)

    def _commit(self) -> None:
        v = self._canonical(self.currentText())
        if v is None:                       # only a prefix was typed: back to the value in force
            self.set_value(self.value)
            return
        changed = v != self.value
        self.set_value(v)
        if changed:
            self.committed.emit(v)


class MetadataEditor(QWidget):
    def __init__(self, editor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.scroll = QScrollArea(widgetResizable=True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        # the fields live in `body`, inside a holder that stays: a rebuild swaps the body and deletes the old one
        # on the next event-loop turn (never while one of its widgets is still inside its own signal or event)
        holder = QWidget()
        # never wider than the dock (no horizontal scrolling): a long finding or label wraps, fields narrow
        holder.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        holder.setMinimumWidth(240)     # ... down to a width where they still work (0 while the dock is tabbed)
        self.holder = QVBoxLayout(holder)
        self.holder.setContentsMargins(0, 0, 0, 0)
        self.scroll.setWidget(holder)
        self.body: QWidget | None = None
        self.hint = QLabel(wordWrap=True)
        self.hint.setStyleSheet(f"color:{css('error')}; padding:2px")
        self.hint.hide()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.hint)
        lay.addWidget(self.scroll, 1)
        self.types: dict[str, ChoiceCombo] = {}
        self.dims: dict[str, list[ChoiceCombo]] = {}
        self.image: dict[str, ChoiceCombo] = {}
        self.stale = False
        self.own_edit = False           # the next re-run comes from this editor's own commit (the user is typing)
        QApplication.instance().focusChanged.connect(self._focus_moved)
        self.fix_buttons: dict[str, list[QPushButton]] = {}      # field -> its findings' one-click fixes
        self.io_query = ""              # the inputs/outputs filter, kept across rebuilds
        self._ios: list = []
        self.image_on = False           # some input or output is denoted IMAGE
        self.found: list = []
        self.shown = None               # what the panel was built from (_content), when that can be told
        # the values the exported model will carry: from the event loop, a group of fields per turn (built whole,
        # on a big model it was one stall with the graph's slices), greyed until the new fields replace them
        self._chunks = None             # the rebuild under way from the event loop (a generator of _rebuilding)
        self._soon = QTimer(self, singleShot=True, interval=0, timeout=self._step)
        self.refresh()
        views = editor.window.views
        views.subscribe(self._opened, ModelOpened)
        views.subscribe(lambda _e: self.refresh_soon(), PlanChanged)
        # its findings, right after; while a rebuild waits (for the event loop, or for the user to stop typing),
        # that rebuild shows them (one under way starts again: it may have read the findings before they came)
        views.subscribe(self._findings_came, FindingsChecked)

    def _opened(self, _e) -> None:
        self.io_query = ""
        self.shown = None               # another model: rebuilt whatever it holds, from the event loop
        self.refresh_soon()

    def refresh_soon(self) -> None:
        body = self.body
        if body is not None and not self.editing():     # a field being typed in keeps the keyboard (refresh())
            body.setEnabled(False)
        self._chunks = None
        self._soon.start()

    def _findings_came(self, _e) -> None:
        if self.stale:                  # the fields wait for the focus to leave them; their findings do not
            self._show_findings()
            return
        if self._chunks is not None:
            self.refresh_soon()
        elif not self._soon.isActive():
            self.refresh()

    def _step(self) -> None:
        """The next piece of the rebuild refresh_soon asked for."""
        if self._chunks is None:
            self._chunks = self._rebuilding(False)
        if next(self._chunks, True) is True:
            self._chunks = None
        else:
            self._soon.start()

    @property
    def pending(self) -> bool:
        """A rebuild waits for the event loop."""
        return self._soon.isActive() or self._chunks is not None

    def editing(self) -> bool:
        """A field of this editor has the keyboard: rebuilding now would drop what the user is typing (a committed
        field moves the focus on to the next one, whose re-run then lands mid-typing). A drop-down's open popup
        counts as its combo (a top-level window of its own: isAncestorOf stops there)."""
        f = QApplication.focusWidget()
        while f is not None and not isinstance(f, (QLineEdit, QComboBox, QTableWidget)):    # a popup's list
            f = f.parentWidget()
        return f is not None and self.isAncestorOf(f)

    def _focus_moved(self, _old, _new) -> None:
        # on the next turn: the focus moves inside a widget's own event (a click on a drop-down's arrow)
        if self.stale and shiboken6.isValid(self) and not self.editing():
            self.refresh_soon()

    # ---- building ------------------------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Rebuild from the session. After the user's own commit, while they type on in another of its fields, once
        the focus leaves it; any other change (undo, pins, another model) at once."""
        self._chunks = None
        self._soon.stop()
        for _ in self._rebuilding(force):
            pass

    def _rebuilding(self, force: bool):
        """refresh()'s work, yielding False between groups of fields: the new fields replace the old at the end."""
        own, self.own_edit = self.own_edit, False
        if own and not force and self.editing() and self.editor.session is not None:
            # the fields wait for the keyboard to leave them; the findings do not: the ones the result came with
            # (an ONNX model's, a pair's) or that came before this turn are shown now, the rest on FindingsChecked
            self.stale = True
            if getattr(self.editor.session.result, "findings", None) is not None:
                self._show_findings()
            return
        self.stale = False
        s = self.editor.session
        r = s.result if s is not None else None
        body = self.body
        if r is not None and getattr(r, "checking", False) and getattr(r, "findings", None) is None:
            if body is not None:        # the findings follow the graph: until then nothing stale can be used
                body.setEnabled(False)
            return
        content = self._content(s)
        if not force and self.shown is not None and content == self.shown:
            if body is not None:
                body.setEnabled(True)
            return                      # a pin that leaves the metadata as it was: nothing to rebuild
        # what is shown is known once this rebuild is shown: one given up half-way (another result came) left the
        # old fields on screen, and its successor took them for the new ones
        self.shown = None
        body = QWidget()
        form = QVBoxLayout(body)
        self.types, self.dims, self.image, self.fix_buttons, self.field_findings = {}, {}, {}, {}, {}
        if s is None or s.result is None:
            form.addWidget(QLabel("Open a TFLite model to edit the metadata of its ONNX conversion, or an ONNX "
                                  "model to edit its own.", wordWrap=True))
            form.addStretch(1)
            self._show(body)
            return
        model = s.result.model
        self.state = MetadataEdits.from_model(model, values=False)     # types and dims: read from the model
        self.sources = self._sources()
        self.found = self._lint(model)
        form.addWidget(self._target_row())
        yield False
        form.addWidget((yield from self._io_group(model)))
        yield False
        form.addWidget(self._image_group())
        yield False
        form.addWidget(self._props_group())
        form.addWidget(self._model_group())
        yield False
        form.addWidget(self._findings_group(model))
        if s.notes:
            notes = QLabel("<br>".join(html.escape(n) for n in s.notes), wordWrap=True)
            notes.setStyleSheet(f"color:{css('muted')}; font-size:11px")
            notes.setTextInteractionFlags(Qt.TextSelectableByMouse)
            box = QGroupBox("Notes from the conversion" if s.converts else "Notes")
            QVBoxLayout(box).addWidget(notes)
            form.addWidget(box)
        form.addStretch(1)
        pos = self.scroll.verticalScrollBar().value()
        self._show(body)
        self.shown = content
        self.scroll.verticalScrollBar().setValue(pos)

    def _show(self, body: QWidget) -> None:
        """The new fields in place of the old, which are deleted once control is back in the event loop."""
        old, self.body = self.body, body
        self.holder.addWidget(body)
        if old is not None:
            self.holder.removeWidget(old)
            old.hide()
            old.deleteLater()
        # sized now, as setWidget did: a dock tabbed away posts no layout request, and its fields stayed 0 px tall
        self.holder.activate()
        self.scroll.setWidgetResizable(True)        # (re-computes the holder's size from its layout)

    def _content(self, s):
        """Everything the panel shows comes from this (model metadata and I/O, notes, edits, findings, target), or
        None when it cannot be told (no result, a pair, findings not computed yet): then it is always rebuilt."""
        r = s.result if s is not None else None
        if r is None or not s.converts or getattr(r, "findings", None) is None:
            return None
        m, g = r.model, r.model.graph
        return (id(s), s.target, b"".join(v.SerializeToString() for v in [*g.input, *g.output]),
                [(p.key, p.value) for p in m.metadata_props], m.doc_string, m.producer_name, m.producer_version,
                m.model_version, g.doc_string, tuple(s.notes), repr(s.metadata.to_dict()),
                [repr(f) for f in r.findings])

    def _sources(self) -> dict[str, str]:
        """Field -> where its value came from: 'edited', the TFLite metadata, or the conversion's layout."""
        s = self.editor.session
        out: dict[str, str] = {}
        meta = read_tflite_metadata(s.graph) if s.converts else None
        if meta is not None:
            out.update({k: f"from {v}" for k, v in meta.sources.items()})
        if not s.converts:                  # a pair's or an ONNX model's: the values come from that file
            out.update(s.metadata_sources())
        for note in s.notes:
            if note.startswith("'") and "dimension denotations" in note:
                name = note[1:note.index("'", 1)]
                out.setdefault(f"dims:{name}", "from its layout" if "from its layout" in note else
                               "propagated from the inputs" if "propagated" in note else note)
        e = s.metadata
        out.update({k: "edited" for k in e.types})
        out.update({f"dims:{k}": "edited" for k in e.dims})
        out.update({ms.image_key(k) or k: "edited" for k in e.image})
        for name in ("doc_string", "producer", "model_version"):
            if getattr(e, name) is not None:
                out[name] = "edited"
        return out

    def _source_label(self, key: str) -> QLabel:
        text = self.sources.get(key, "")
        label = QLabel(text, wordWrap=True, textFormat=Qt.PlainText)
        label.setStyleSheet(f"color:{css('good' if text == 'edited' else 'muted')}; font-size:11px")
        return label

    def _combo(self, allowed, what: str, value: str, on_commit) -> ChoiceCombo:
        c = ChoiceCombo(allowed, what)
        c.set_value(value)
        c.committed.connect(on_commit)
        return c

    def _io_group(self, model):
        """The box of the graph's inputs and outputs (a generator: it yields False after each row; returns the box).
        Rows are built IO_PAGE at a time (100,000 inputs built whole froze the window for minutes): "Show more"
        builds the next page, and above that many a name filter finds any one."""
        box = QGroupBox("Graph inputs and outputs")
        lay = QVBoxLayout(box)
        inits = {t.name for t in model.graph.initializer}
        ios, self.image_on = [], False
        for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
            for k, vi in enumerate(values):         # read in slices: 100,000 of them at once are a stall
                if kind == "output" or vi.name not in inits:
                    ios.append((vi, kind))
                    self.image_on = self.image_on or vi.type.denotation.upper() == "IMAGE"
                if k % IO_SCAN == IO_SCAN - 1:
                    yield False
        self._ios = ios
        self.io_filter = None
        if len(ios) > IO_PAGE:
            self.io_filter = QLineEdit(self.io_query, placeholderText=f"find among {len(ios):,} inputs and outputs "
                                                                      "by name")
            self.io_filter.setClearButtonEnabled(True)
            self.io_filter.textEdited.connect(self._filter_io)
            lay.addWidget(self.io_filter)
        self._io_match = self._matching(self.io_query if self.io_filter is not None else "")
        self.io_rows = QVBoxLayout()
        self.io_rows.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(self.io_rows)
        self.io_more = QPushButton(clicked=lambda: self._build_io_now())
        lay.addWidget(self.io_more)
        yield from self._build_io()
        return box

    def _build_io(self):
        """The next IO_PAGE rows of the inputs and outputs matching the filter (a generator, as _io_group)."""
        start = self.io_rows.count()
        for vi, kind in self._io_match[start:start + IO_PAGE]:
            self.io_rows.addWidget(self._io_row(vi, kind))
            yield False
        left = len(self._io_match) - self.io_rows.count()
        self.io_more.setText(f"Show {min(left, IO_PAGE):,} more (of {left:,} not shown)")
        self.io_more.setVisible(left > 0)

    def _build_io_now(self) -> None:
        for _ in self._build_io():
            pass

    def _filter_io(self, text: str) -> None:
        while self.io_rows.count():
            w = self.io_rows.takeAt(0).widget()
            w.hide()                    # not setParent(None): Python would own it and delete it at once
            w.deleteLater()
        self.types, self.dims = {}, {}
        # the rows' findings holders went with them: _show_findings must not fill a deleted one
        self.field_findings = {k: v for k, v in self.field_findings.items() if not k.startswith(("type:", "dims:"))}
        self.io_query = text
        self._io_match = self._matching(text)
        self._build_io_now()

    def _matching(self, text: str) -> list:
        low = text.strip().lower()
        return [(vi, kind) for vi, kind in self._ios if low in vi.name.lower()] if low else self._ios

    def _io_row(self, vi, kind: str) -> QWidget:
        """One input's or output's fields: its type denotation and one per axis, with their sources and findings."""
        row_box = QWidget()
        lay = QVBoxLayout(row_box)
        lay.setContentsMargins(0, 0, 0, 0)
        name = vi.name
        tt = vi.type.tensor_type
        dims = list(tt.shape.dim) if tt.HasField("shape") else []
        shape = "×".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
        title = QLabel(f"<b>{html.escape(name[-48:])}</b> <span style='color:{css('muted')}'>({kind}, {shape})</span>")
        title.setToolTip(name)
        lay.addWidget(title)
        row = QHBoxLayout()
        row.addWidget(QLabel("type"))
        t = self._combo(ms.TYPE_DENOTATIONS, "type denotation", vi.type.denotation,
                        lambda v, n=name: self._set_type(n, v))
        self.types[name] = t
        row.addWidget(t, 1)
        lay.addLayout(row)
        lay.addWidget(t.refusal)
        lay.addWidget(self._source_label(name))
        self._add_field_findings(lay, f"type:{name}")
        if dims:
            row = QGridLayout()
            row.setColumnStretch(1, 1)
            combos = []
            for i, d in enumerate(dims):
                c = self._combo(ms.DIM_DENOTATIONS, "dimension denotation", d.denotation,
                                lambda _v, n=name: self._set_dims(n))
                c.setToolTip(f"axis {i} ({d.dim_value if d.HasField('dim_value') else '?'}): " + c.toolTip())
                combos.append(c)
                row.addWidget(QLabel(f"axis {i}"), 2 * i, 0)      # one per row: the names are long
                row.addWidget(c, 2 * i, 1)
                row.addWidget(c.refusal, 2 * i + 1, 1)
            self.dims[name] = combos
            lay.addLayout(row)
            lay.addWidget(self._source_label(f"dims:{name}"))
            self._add_field_findings(lay, f"dims:{name}")
        return row_box

    def _image_group(self) -> QGroupBox:
        box = QGroupBox("Image (model-wide)")
        lay = QFormLayout(box)
        note = QLabel("These keys apply to every tensor denoted IMAGE. Enabled when some input or output has "
                      "type IMAGE.", wordWrap=True)
        note.setStyleSheet(f"color:{css('muted')}; font-size:11px")
        lay.addRow(note)
        on = self.image_on              # some input or output is IMAGE, its row built or not
        for key, allowed in ms.IMAGE_KEYS.items():
            c = self._combo(allowed, key, self.state.image.get(key) or "", lambda v, k=key: self._set_image(k, v))
            c.setEnabled(on)
            self.image[key] = c
            col = QVBoxLayout()
            col.addWidget(c)
            col.addWidget(c.refusal)
            col.addWidget(self._source_label(key))
            self._add_field_findings(col, key)
            lay.addRow(key.split(".", 1)[1], col)
        self.image_box = box
        return box

    def _props_group(self) -> QGroupBox:
        box = QGroupBox("Other metadata_props")
        lay = QVBoxLayout(box)
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["key", "value"])
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().hide()
        # An entry whose key or value is not UTF-8 (protobuf gives bytes) is shown escaped and read-only: kept as it
        # is, never part of an edit (a typed key could not name it).
        self.props = {k: v for k, v in self.state.props.items() if isinstance(k, str) and isinstance(v, str)}
        self.raw_props = [(k, v) for k, v in self.state.props.items() if (k, v) not in self.props.items()]
        self._fill_table()
        self.table.setMinimumHeight(90)
        self.table.cellChanged.connect(lambda *_: self._set_props())
        buttons = QHBoxLayout()
        add = QPushButton("Add", clicked=self._add_row)
        remove = QPushButton("Remove", clicked=self._remove_rows)
        buttons.addWidget(add)
        buttons.addWidget(remove)
        buttons.addStretch(1)
        lay.addWidget(self.table)
        lay.addLayout(buttons)
        return box

    def _model_group(self) -> QGroupBox:
        box = QGroupBox("Model")
        lay = QFormLayout(box)
        self.doc_string = QLineEdit(self.state.doc_string or "")
        self.producer = QLineEdit(self.state.producer or "")
        self.version = QLineEdit(str(self.state.model_version or 0))
        self.version.setValidator(QRegularExpressionValidator(QRegularExpression(r"-?\d{0,18}"), self.version))
        self.version.setToolTip("an integer (ONNX model_version is a 64-bit integer)")
        for field, label, key in ((self.doc_string, "doc string", "doc_string"), (self.producer, "producer", "producer"),
                                  (self.version, "version", "model_version")):
            field.editingFinished.connect(lambda k=key, f=field: self._set_field(k, f.text()))
            col = QVBoxLayout()
            col.addWidget(field)
            if self.sources.get(key):
                col.addWidget(self._source_label(key))
            lay.addRow(label, col)
        return box

    def _lint(self, model) -> list:
        """The target's findings; dimension propagation's come from the re-run's worker when it computed them. (Read
        with this process's records: on the GUI thread, only what the last model read lacks is parsed.)"""
        from inspector.core.metadata.lint import Linter

        from ..rerun_child import records
        linter = Linter(records())
        target = self.editor.session.target if self.editor.session is not None else "onnx"
        done = getattr(self.editor.session.result, "findings", None)      # the onnx target's, off the GUI thread
        try:
            if done is None:
                return linter.lint(model, target)
            if target == "onnx":
                return done
            return linter.lint(model, target, dims=False) + [f for f in done if f.code.startswith("dims-")]
        except Exception as e:     # the checker is advice: a failure is shown, never fatal
            from inspector.core.metadata.findings import Finding
            return [Finding("", f"checker failed: {e}", code="", severity="warning")]

    def _target_row(self) -> QWidget:
        from inspector.core.metadata import targets
        names = targets.names()
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Check for"))
        self.target = QComboBox()
        self.target.addItems([targets.get(t).label for t in names])
        # its longest label would widen the fields past a narrow dock (their arrows cut off at the right)
        self.target.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.target.setMinimumContentsLength(8)
        self.target.setCurrentIndex(names.index(self.editor.session.target if self.editor.session is not None
                                                else targets.DEFAULT))
        self.target.setToolTip("the consumer whose metadata rules the checks and Export apply")
        self.target.activated.connect(lambda i: self._set_target(names[i]))
        lay.addWidget(self.target, 1)
        fixable = self._fixable = [f for f in self.found if f.fix is not None]
        self.fix_all = QPushButton(f"Fix {len(fixable)} safely", enabled=bool(fixable),
                                   toolTip="apply every fix that cannot change what the model means")
        self.fix_all.clicked.connect(lambda: self.apply_fixes(fixable))
        lay.addWidget(self.fix_all)
        return row

    def _set_target(self, target: str) -> None:
        self.editor.session.target = target
        self.refresh_soon()                 # not inside the drop-down's own `activated`: it is rebuilt too

    def _add_field_findings(self, lay, key: str) -> None:
        """The findings about one field, under it: severity, message, and a Fix button where a fix is safe. In a
        holder of their own, which new findings refill in place (_show_findings)."""
        holder = QVBoxLayout()
        holder.setContentsMargins(0, 0, 0, 0)
        self.field_findings[key] = holder
        lay.addLayout(holder)
        self._fill_field_findings(key)

    def _fill_field_findings(self, key: str) -> None:
        holder = self.field_findings[key]
        old = holder.takeAt(0) if holder.count() else None
        if old is not None and old.widget() is not None:
            old.widget().hide()
            old.widget().deleteLater()
        self.fix_buttons.pop(key, None)
        mine = [f for f in self.found if f.field == key]
        if not mine:
            return
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        for f in mine:
            row = QHBoxLayout()
            label = QLabel(f"{'✖' if f.severity == 'error' else '⚠'} {f.message}"
                           + (f" — {f.manual}" if f.manual else ""), wordWrap=True, textFormat=Qt.PlainText)
            label.setStyleSheet(f"color:{css('error' if f.severity == 'error' else 'warn')}; font-size:11px")
            label.setToolTip(f"{f.code}: {f.source}")
            row.addWidget(label, 1)
            if f.fix is not None:
                b = QPushButton("Fix", toolTip=f.fix_text)
                b.clicked.connect(lambda _=False, f=f: self.apply_fixes([f]))
                self.fix_buttons.setdefault(key, []).append(b)
                row.addWidget(b)
            lay.addLayout(row)
        holder.addWidget(box)

    def apply_fixes(self, findings) -> bool:
        """One undoable edit applying these findings' safe fixes."""
        over = MetadataEdits()
        for f in findings:
            if f.fix is not None:
                over = over.merged(f.fix)
        text = "Fix " + (findings[0].fix_text if len(findings) == 1 else f"{len(findings)} metadata findings")
        return not over.is_empty() and self._push(over, text[:60])

    def _findings_group(self, model) -> QGroupBox:
        box = QGroupBox("Metadata findings")
        lay = QVBoxLayout(box)
        self.findings = QListWidget()
        self.findings.setWordWrap(True)
        self._fill_findings()
        self.findings.itemClicked.connect(self._jump)
        self.findings.setMaximumHeight(150)
        lay.addWidget(self.findings)
        return box

    def _show_findings(self) -> None:
        """New findings while the fields wait to be rebuilt (the user's own choice keeps its field): shown at once,
        under their fields and in the list, with the Fix buttons; the fields themselves stay as they are."""
        s, shown = self.editor.session, getattr(self, "findings", None)
        if s is None or s.result is None or shown is None or not shiboken6.isValid(shown):
            return
        self.found = self._lint(s.result.model)
        for key in self.field_findings:
            self._fill_field_findings(key)
        self._fill_findings()
        fixable = [f for f in self.found if f.fix is not None]
        self.fix_all.setText(f"Fix {len(fixable)} safely")
        self.fix_all.setEnabled(bool(fixable))
        self._fixable[:] = fixable

    def _fill_findings(self) -> None:
        self.findings.clear()
        for f in self.found:
            mark = "✖ " if f.severity == "error" else "⚠ "
            item = QListWidgetItem(mark + f.message + (f" [{f.code}]" if f.code else ""))
            item.setData(Qt.UserRole, (f.node, f.tensor))
            item.setToolTip((f"fix: {f.fix_text}" if f.fix_text else f.manual or f.message)
                            + (f"\nrule: {f.source}" if f.source else ""))
            self.findings.addItem(item)
        if not self.found:
            self.findings.addItem("no findings: denotations and image metadata agree with the graph and the target")

    # ---- edits ---------------------------------------------------------------------------------------------
    def _push(self, over: MetadataEdits, text: str) -> bool:
        s = self.editor.session
        self.own_edit = True
        err = self.editor.edit_metadata(s.metadata.merged(over), text)
        if err:
            self.own_edit = False
            self.hint.setText(html.escape(err))
            self.hint.show()
            return False
        self.hint.hide()
        return True

    def _set_type(self, name: str, value: str) -> None:
        self._push(MetadataEdits(types={name: value}), f"Type of {name[-30:]} → {value or 'none'}")
        for c in self.image.values():
            c.setEnabled(value == "IMAGE" or self.image_on)

    def _set_dims(self, name: str) -> None:
        values = [c.value for c in self.dims[name]]
        self._push(MetadataEdits(dims={name: values}), f"Axes of {name[-30:]} → [{', '.join(v or '?' for v in values)}]")

    def _set_image(self, key: str, value: str) -> None:
        self._push(MetadataEdits(image={key: value or None}), f"{key} → {value or 'not set'}")

    def _set_field(self, key: str, text: str) -> None:
        value = text
        if key == "model_version":
            try:
                value = int(text or 0)
            except ValueError:
                return
        current = getattr(self.state, key)
        if value == current or (key != "model_version" and value == (current or "")):
            return
        self._push(MetadataEdits(**{key: value}), f"{key.replace('_', ' ')} → {str(value)[:30]}")

    def _rows(self) -> dict[str, str]:
        out = {}
        for r in range(len(self.raw_props), self.table.rowCount()):
            k, v = self.table.item(r, 0), self.table.item(r, 1)
            key = k.text().strip() if k else ""
            if key:
                out[key] = v.text() if v else ""
        return out

    def _set_props(self) -> None:
        rows = self._rows()
        over = MetadataEdits()
        for k, v in rows.items():
            if ms.image_key(k):
                self._refuse_props(f"{k} is model-wide image metadata: use the Image drop-downs above")
                return
            try:
                ms.metadata_entry(k, v)
            except MetadataError as e:
                self._refuse_props(str(e))
                return
            if self.props.get(k) != v:
                over.props[k] = v
        for k in self.props:
            if k not in rows:
                over.props[k] = None
        if over.props:
            self._push(over, "Metadata " + ", ".join(over.props)[:40])

    def _refuse_props(self, message: str) -> None:
        self.hint.setText(html.escape(message))
        self.hint.show()
        self.table.blockSignals(True)
        self.table.setRowCount(0)
        self._fill_table()
        self.table.blockSignals(False)

    def _fill_table(self) -> None:
        for k, v in [*self.raw_props, *self.props.items()]:
            r = self.table.rowCount()
            self.table.insertRow(r)
            for c, text in enumerate((k, v)):
                item = QTableWidgetItem(text_of(text))
                if (k, v) in self.raw_props:
                    item.setFlags(item.flags() & ~Qt.ItemIsEditable)
                    item.setToolTip("not valid UTF-8 in the file: shown with its bytes escaped, kept as it is")
                self.table.setItem(r, c, item)

    def _add_row(self) -> None:
        self.table.blockSignals(True)
        r = self.table.rowCount()
        self.table.insertRow(r)
        self.table.setItem(r, 0, QTableWidgetItem(""))
        self.table.setItem(r, 1, QTableWidgetItem(""))
        self.table.blockSignals(False)
        self.table.setCurrentCell(r, 0)               # Tab then moves on to this row's value
        self.table.editItem(self.table.item(r, 0))

    def _remove_rows(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes() if i.row() >= len(self.raw_props)}, reverse=True)
        self.table.blockSignals(True)
        for r in rows:
            self.table.removeRow(r)
        self.table.blockSignals(False)
        self._set_props()

    def _jump(self, item) -> None:
        from ..graph_model import ONNX
        node, tensor = item.data(Qt.UserRole) or ("", "")
        w = self.editor.window
        if node:
            w.select(ONNX, nodes=[node])
        elif tensor:
            w.follow_link(f"onnx-value:{quote(tensor, safe='')}")
