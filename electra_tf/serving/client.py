"""A small client for an exported ELECTRA model behind TensorFlow Serving.

REST (port 8501):
    >>> body = rest_request(texts=["The cat sat."])
    >>> body["signature_name"], body["inputs"]
    ('serving_default', {'text': ['The cat sat.']})

    outputs = rest_predict("http://localhost:8501", "electra", body)   # dict of lists

gRPC (port 8500), with tensorflow-serving-api:
    request = grpc_request("electra", texts=["The cat sat."])
    outputs = grpc_predict("localhost:8500", request)                  # dict of numpy arrays
"""

from __future__ import annotations

import json
import urllib.request

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def _inputs(texts, token_ids, segment_ids, padding_mask):
    if texts is not None:
        if any(v is not None for v in (token_ids, segment_ids, padding_mask)):
            raise ValueError("give either texts or token_ids/segment_ids/padding_mask, not both.")
        if isinstance(texts, (str, bytes)):
            raise ValueError("texts must be a list of strings (a batch), not one string.")
        return TEXT_SIGNATURE, {"text": list(texts)}
    values = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise ValueError(f"the {IDS_SIGNATURE} signature needs {', '.join(ID_INPUTS)}; missing {missing}.")
    rows = [[[int(x) for x in row] for row in value] for value in values.values()]
    shapes = {(len(batch), *(len(row) for row in batch)) for batch in rows}
    if len(shapes) != 1 or len({len(row) for batch in rows for row in batch}) > 1:
        raise ValueError("token_ids, segment_ids and padding_mask must be rectangular and of one shape.")
    return IDS_SIGNATURE, dict(zip(values, rows))


def rest_request(texts=None, *, token_ids=None, segment_ids=None, padding_mask=None) -> dict:
    """The JSON body of a `:predict` call (columnar "inputs" format)."""
    signature, inputs = _inputs(texts, token_ids, segment_ids, padding_mask)
    return {"signature_name": signature, "inputs": inputs}


def rest_predict(server: str, model: str, body: dict, timeout: float = 30.0) -> dict:
    """POSTs `body` to SERVER/v1/models/MODEL:predict; returns the "outputs" dict."""
    request = urllib.request.Request(
        f"{server.rstrip('/')}/v1/models/{model}:predict", data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))["outputs"]


def grpc_request(model: str, texts=None, *, token_ids=None, segment_ids=None, padding_mask=None,
                 version: int | None = None):
    """A tensorflow_serving PredictRequest for either signature."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    signature, inputs = _inputs(texts, token_ids, segment_ids, padding_mask)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    for name, value in inputs.items():
        dtype = tf.string if name == "text" else tf.int32
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
    return request


def grpc_predict(target: str, request, timeout: float = 30.0) -> dict:
    """Sends a PredictRequest to TARGET (host:port); returns outputs as numpy arrays."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(request, timeout=timeout)
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
