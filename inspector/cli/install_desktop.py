"""`install-desktop [--uninstall]`: a desktop entry, icon and .tflite/.onnx file associations for this user (Linux)."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("install-desktop", help="add Layout Inspector to this user's desktop menu and file associations",
                       description="Writes a .desktop entry, the icon and MIME types for .tflite and .onnx into the "
                                   "XDG user data folder ($XDG_DATA_HOME, default ~/.local/share); --uninstall "
                                   "removes exactly those files and what installing made (folders, the MIME cache). All or nothing: "
                                   "a failure undoes what was done and says why in one line.")
    p.add_argument("--uninstall", action="store_true", help="remove what install-desktop wrote")
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector import desktop
    if args.uninstall:
        removed = desktop.uninstall()
        print("\n".join(f"removed {p}" for p in removed) or "nothing to remove")
    else:
        for p in desktop.install():
            print(f"wrote {p}")
    return 0
