"""The driver test: the driver's library loads, or not."""

from electra_tf.utils import nvidia


def test_a_driver_is_installed_when_its_library_loads(monkeypatch):
    loaded = []
    monkeypatch.setattr(nvidia.ctypes, "CDLL", loaded.append)
    assert nvidia.driver_installed() and loaded == ["libcuda.so.1"]

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(nvidia.ctypes, "CDLL", missing)
    assert not nvidia.driver_installed()
