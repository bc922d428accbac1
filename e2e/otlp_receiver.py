"""An OTLP/HTTP trace receiver for mcpx's telemetry tests: decodes each POST /v1/traces body
with the official protobuf definitions (the opentelemetry-proto package) and appends every span
it holds to a file as one JSON line (ids in hex, attributes as a flat object, the resource's
service.name). Prints the port it listens on, then serves until killed. With --discard (the
benchmark's collector) it reads each body and answers, decoding and keeping nothing.

    python otlp_receiver.py SPANS_FILE
    python otlp_receiver.py --discard --port 4318
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

parser = argparse.ArgumentParser()
parser.add_argument("spans", nargs="?", help="the file each span is appended to, as a JSON line")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--discard", action="store_true", help="answer without decoding or keeping anything")
ARGS = parser.parse_args()


def value(v):
    """An AnyValue as Python."""
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if ARGS.discard:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(415 if self.path == "/v1/traces" else 404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "status": span.status.code,
                            "status_message": span.status.message,
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "service_name": resource.get("service.name"),
                            "scope": scope_spans.scope.name,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                        }
                    )
        with open(ARGS.spans, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):  # noqa: A002 (the http.server API)
        pass


server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Receiver)
print(server.server_address[1], flush=True)
server.serve_forever()
