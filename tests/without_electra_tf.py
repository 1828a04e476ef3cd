"""The first lines of a script run in a fresh process that must not import electra_tf (what a
user of an exported file has): any import of it raises."""

REFUSE_ELECTRA_TF = r'''
import importlib.abc, json, sys

class NoElectraTf(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "electra_tf":
            raise ImportError("an exported file must be usable without electra_tf")

sys.meta_path.insert(0, NoElectraTf())
'''
