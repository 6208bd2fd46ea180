import pytest

from ampcore.device import Device, parse_device


def test_parse_device_strings():
    assert parse_device("cpu") == Device("cpu", 0)
    assert parse_device("cuda:1") == Device("cuda", 1)
    assert str(parse_device("opencl:0")) == "opencl:0"
    assert str(parse_device("cpu")) == "cpu"


@pytest.mark.parametrize("bad", ["cuda:", ":0", "cuda:-1", "cu da", "cuda:x"])
def test_malformed_device_names_the_value(bad):
    with pytest.raises(ValueError, match="malformed device"):
        parse_device(bad)


def test_non_string_device_is_a_type_error():
    with pytest.raises(TypeError, match="3"):
        parse_device(3)
