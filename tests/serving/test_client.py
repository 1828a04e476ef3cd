import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.serving import client as serving_client


def test_rest_request_for_text_and_ids():
    assert serving_client.rest_request(texts=["a b", ""]) == {
        "signature_name": "serving_default", "inputs": {"text": ["a b", ""]}}
    body = serving_client.rest_request(token_ids=[[2, 7, 3]], segment_ids=[[0, 0, 0]], padding_mask=[[1, 1, 1]])
    assert body == {"signature_name": "encode_ids", "inputs": {
        "token_ids": [[2, 7, 3]], "segment_ids": [[0, 0, 0]], "padding_mask": [[1, 1, 1]]}}
    json.dumps(body)  # serialisable as is


@pytest.mark.parametrize("kwargs, message", [
    (dict(texts="one string"), "list of strings"),
    (dict(texts=["x"], token_ids=[[1]]), "not both"),
    (dict(token_ids=[[1, 2]], segment_ids=[[0, 0]]), "missing \\['padding_mask'\\]"),
    (dict(token_ids=[[1, 2]], segment_ids=[[0]], padding_mask=[[1, 1]]), "rectangular"),
])
def test_bad_requests_are_explained(kwargs, message):
    with pytest.raises(ValueError, match=message):
        serving_client.rest_request(**kwargs)


def test_grpc_request_carries_typed_tensors():
    request = serving_client.grpc_request("electra", texts=["hello", "world"], version=3)
    assert request.model_spec.name == "electra" and request.model_spec.version.value == 3
    assert request.model_spec.signature_name == "serving_default"
    np.testing.assert_array_equal(tf.make_ndarray(request.inputs["text"]), [b"hello", b"world"])
    request = serving_client.grpc_request("electra", token_ids=[[2, 3]], segment_ids=[[0, 0]], padding_mask=[[1, 1]])
    assert request.model_spec.signature_name == "encode_ids"
    assert request.inputs["token_ids"].dtype == tf.int32.as_datatype_enum
    assert tf.make_ndarray(request.inputs["padding_mask"]).shape == (1, 2)


def test_rest_predict_round_trip_on_loopback():
    """A stand-in server on 127.0.0.1 answering one :predict call the way TF Serving does."""
    seen = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen["path"] = self.path
            seen["body"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps({"outputs": {"replaced_probability": [[0.1, 0.9]]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        body = serving_client.rest_request(texts=["The cat sat."])
        outputs = serving_client.rest_predict(f"http://127.0.0.1:{server.server_port}", "electra", body, timeout=10)
    finally:
        thread.join(timeout=10)
        server.server_close()
    assert seen["path"] == "/v1/models/electra:predict" and seen["body"] == body
    assert outputs == {"replaced_probability": [[0.1, 0.9]]}
