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

from PySide6.QtCore import QRegularExpression, Qt, Signal
from PySide6.QtGui import QRegularExpressionValidator, QValidator
import shiboken6
from PySide6.QtWidgets import (QApplication, QComboBox, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPushButton, QScrollArea, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from inspector.core.metadata import schema as ms
from inspector.core.ir.errors import MetadataError
from inspector.core.metadata.edits import MetadataEdits

NONE = "—"


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
        self.activated.connect(lambda _i: self._commit())
        self.lineEdit().editingFinished.connect(self._commit)

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
        self.hint = QLabel(wordWrap=True)
        self.hint.setStyleSheet("color:#b00; padding:2px")
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
        self.refresh()

    def editing(self) -> bool:
        """A field of this editor has the keyboard: rebuilding now would drop what the user is typing (a committed
        field moves the focus on to the next one, whose re-run then lands mid-typing)."""
        f = QApplication.focusWidget()
        return f is not None and self.isAncestorOf(f) and isinstance(f, (QLineEdit, QComboBox, QTableWidget))

    def _focus_moved(self, _old, _new) -> None:
        if self.stale and shiboken6.isValid(self) and not self.editing():
            self.refresh()

    # ---- building ------------------------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Rebuild from the session. After the user's own commit, while they type on in another of its fields, once
        the focus leaves it; any other change (undo, pins, another model) at once."""
        own, self.own_edit = self.own_edit, False
        if own and not force and self.editing() and self.editor.session is not None:
            self.stale = True
            return
        self.stale = False
        s = self.editor.session
        pos = self.scroll.verticalScrollBar().value()
        body = QWidget()
        form = QVBoxLayout(body)
        self.types, self.dims, self.image = {}, {}, {}
        if s is None or s.result is None:
            form.addWidget(QLabel("Open a TFLite model to edit the metadata of its ONNX conversion.", wordWrap=True))
            form.addStretch(1)
            self.scroll.setWidget(body)
            return
        model = s.result.model
        self.state = MetadataEdits.from_model(model)
        self.sources = self._sources()
        form.addWidget(self._io_group(model))
        form.addWidget(self._image_group())
        form.addWidget(self._props_group())
        form.addWidget(self._model_group())
        form.addWidget(self._findings_group(model))
        if s.notes:
            notes = QLabel("<br>".join(html.escape(n) for n in s.notes), wordWrap=True)
            notes.setStyleSheet("color:#555; font-size:11px")
            notes.setTextInteractionFlags(Qt.TextSelectableByMouse)
            box = QGroupBox("Notes" if hasattr(s, "metadata_sources") else "Notes from the conversion")
            QVBoxLayout(box).addWidget(notes)
            form.addWidget(box)
        form.addStretch(1)
        self.scroll.setWidget(body)
        self.scroll.verticalScrollBar().setValue(pos)

    def _sources(self) -> dict[str, str]:
        """Field -> where its value came from: 'edited', the TFLite metadata, or the conversion's layout."""
        from inspector.core.metadata.tflite import read_tflite_metadata
        s = self.editor.session
        out: dict[str, str] = {}
        meta = read_tflite_metadata(s.graph) if not hasattr(s, "metadata_sources") else None
        if meta is not None:
            out.update({k: f"from {v}" for k, v in meta.sources.items()})
        if hasattr(s, "metadata_sources"):         # a pair: the values come from the other ONNX file
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
        label.setStyleSheet("color:#2a6f2a; font-size:11px" if text == "edited" else "color:#666; font-size:11px")
        return label

    def _combo(self, allowed, what: str, value: str, on_commit) -> ChoiceCombo:
        c = ChoiceCombo(allowed, what)
        c.set_value(value)
        c.validator_.refused.connect(lambda text, w=what, a=allowed: self._refused(text, w, a))
        c.committed.connect(on_commit)
        return c

    def _refused(self, text: str, what: str, allowed) -> None:
        self.hint.setText(f"'{html.escape(text)}' refused: allowed values for {what} are {', '.join(allowed)}")
        self.hint.show()

    def _io_group(self, model) -> QGroupBox:
        box = QGroupBox("Graph inputs and outputs")
        lay = QVBoxLayout(box)
        inits = {t.name for t in model.graph.initializer}
        ios = [(vi, "input") for vi in model.graph.input if vi.name not in inits]
        ios += [(vi, "output") for vi in model.graph.output]
        for vi, kind in ios:
            name = vi.name
            tt = vi.type.tensor_type
            dims = list(tt.shape.dim) if tt.HasField("shape") else []
            shape = "×".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
            title = QLabel(f"<b>{html.escape(name[-48:])}</b> <span style='color:#666'>({kind}, {shape})</span>")
            title.setToolTip(name)
            lay.addWidget(title)
            row = QHBoxLayout()
            row.addWidget(QLabel("type"))
            t = self._combo(ms.TYPE_DENOTATIONS, "type denotation", vi.type.denotation,
                            lambda v, n=name: self._set_type(n, v))
            self.types[name] = t
            row.addWidget(t, 1)
            lay.addLayout(row)
            lay.addWidget(self._source_label(name))
            if dims:
                row = QGridLayout()
                row.setColumnStretch(1, 1)
                combos = []
                for i, d in enumerate(dims):
                    c = self._combo(ms.DIM_DENOTATIONS, "dimension denotation", d.denotation,
                                    lambda _v, n=name: self._set_dims(n))
                    c.setToolTip(f"axis {i} ({d.dim_value if d.HasField('dim_value') else '?'}): "
                                 + c.toolTip())
                    combos.append(c)
                    row.addWidget(QLabel(f"axis {i}"), i, 0)      # one per row: the names are long
                    row.addWidget(c, i, 1)
                self.dims[name] = combos
                lay.addLayout(row)
                lay.addWidget(self._source_label(f"dims:{name}"))
        return box

    def _image_group(self) -> QGroupBox:
        box = QGroupBox("Image (model-wide)")
        lay = QFormLayout(box)
        note = QLabel("These keys apply to every tensor denoted IMAGE. Enabled when some input or output has "
                      "type IMAGE.", wordWrap=True)
        note.setStyleSheet("color:#555; font-size:11px")
        lay.addRow(note)
        on = any(c.value == "IMAGE" for c in self.types.values())
        for key, allowed in ms.IMAGE_KEYS.items():
            c = self._combo(allowed, key, self.state.image.get(key) or "", lambda v, k=key: self._set_image(k, v))
            c.setEnabled(on)
            self.image[key] = c
            col = QVBoxLayout()
            col.addWidget(c)
            col.addWidget(self._source_label(key))
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
        self.props = {k: v for k, v in self.state.props.items()}
        for k, v in self.props.items():
            r = self.table.rowCount()
            self.table.insertRow(r)
            self.table.setItem(r, 0, QTableWidgetItem(k))
            self.table.setItem(r, 1, QTableWidgetItem(v))
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

    def _findings_group(self, model) -> QGroupBox:
        from inspector.core.metadata.lint import lint
        box = QGroupBox("Denotation findings")
        lay = QVBoxLayout(box)
        self.findings = QListWidget()
        self.findings.setWordWrap(True)
        found = getattr(self.editor.session.result, "findings", None)   # computed off the GUI thread
        try:
            found = lint(model) if found is None else found
        except Exception as e:     # the checker is advice: a failure is shown, never fatal
            found = []
            self.findings.addItem(f"checker failed: {e}")
        for f in found:
            item = QListWidgetItem(("⚑ " if f.node else "") + f.message)
            item.setData(Qt.UserRole, (f.node, f.tensor))
            item.setToolTip("click to show it in the ONNX graph" if f.node or f.tensor else f.message)
            self.findings.addItem(item)
        if not found:
            self.findings.addItem("no findings: denotations and image metadata agree with the graph")
        self.findings.itemClicked.connect(self._jump)
        self.findings.setMaximumHeight(150)
        lay.addWidget(self.findings)
        return box

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
            c.setEnabled(any(t.value == "IMAGE" for t in self.types.values()))

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
        for r in range(self.table.rowCount()):
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
        for k, v in self.props.items():
            r = self.table.rowCount()
            self.table.insertRow(r)
            self.table.setItem(r, 0, QTableWidgetItem(k))
            self.table.setItem(r, 1, QTableWidgetItem(v))
        self.table.blockSignals(False)

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
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
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
