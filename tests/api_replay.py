"""A loopback HTTP server that replays recorded API answers, for the price-source tests.

Routes match on method, path and an optional predicate over the request; each route answers
its replies in order and repeats the last one. Every request is recorded (method, path, query,
headers, body) so tests can assert what a source sent. AWS answers: :func:`aws_json_reply`
for the JSON-protocol Price List API and :func:`ec2_xml_reply` (serialised from botocore's own
service model, so boto3 parses it as it parses EC2) for EC2's query protocol.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "api"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.body.decode())


@dataclass
class Route:
    method: str
    path: str
    replies: list[Reply]
    when: Callable[[Request], bool] | None = None
    hits: int = 0


def file_reply(name: str, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, (FIXTURES / name).read_bytes(),
                 {"Content-Type": "application/json", **(headers or {})})


def json_reply(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload).encode(),
                 {"Content-Type": "application/json", **(headers or {})})


def aws_json_reply(payload: Any) -> Reply:
    return Reply(200, json.dumps(payload).encode(), {"Content-Type": "application/x-amz-json-1.1"})


class ReplayServer:
    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, parts.path, parse_qs(parts.query),
                                  {k.lower(): v for k, v in self.headers.items()},
                                  self.rfile.read(length))
                reply = server._answer(request)
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet test output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, method: str, path: str, *replies: Reply,
            when: Callable[[Request], bool] | None = None) -> Route:
        route = Route(method, path, list(replies), when)
        self.routes.append(route)
        return route

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            routes = list(self.routes)
        for route in routes:
            # Predicates run unlocked: a test may make one request wait for another.
            if route.method == request.method and route.path == request.path and (
                    route.when is None or route.when(request)):
                with self._lock:
                    reply = route.replies[min(route.hits, len(route.replies) - 1)]
                    route.hits += 1
                return reply
        return json_reply({"error": f"no route for {request.method} {request.path}"}, 404)

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# ------------------------------------------------------------------------------- EC2 (query/XML)

def _xml(shape: Any, value: Any, name: str) -> Iterator[str]:
    kind = shape.type_name
    if kind == "structure":
        yield f"<{name}>"
        for member_name, member in shape.members.items():
            if member_name in value:
                tag = member.serialization.get("name", member_name[0].lower() + member_name[1:])
                yield from _xml(member, value[member_name], tag)
        yield f"</{name}>"
    elif kind == "list":
        yield f"<{name}>"
        for item in value:
            yield from _xml(shape.member, item, shape.member.serialization.get("name", "item"))
        yield f"</{name}>"
    elif kind == "timestamp":
        stamp = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)
        yield f"<{name}>{stamp.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M:%S.000Z')}</{name}>"
    elif kind == "boolean":
        yield f"<{name}>{'true' if value else 'false'}</{name}>"
    else:
        yield f"<{name}>{escape(str(value))}</{name}>"


def ec2_xml_reply(operation: str, payload: Mapping[str, Any]) -> Reply:
    """An EC2 query-protocol answer for ``operation`` holding ``payload`` (boto3's dict shape)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("ec2")
    output = model.operation_model(operation).output_shape
    body = "".join(_xml(output, dict(payload), f"{operation}Response"))
    body = body.replace(f"<{operation}Response>",
                        f'<{operation}Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                        "<requestId>replay</requestId>", 1)
    return Reply(200, ('<?xml version="1.0" encoding="UTF-8"?>' + body).encode(),
                 {"Content-Type": "text/xml"})


def ec2_action(action: str) -> Callable[[Request], bool]:
    return lambda r: r.form().get("Action") == [action]


def aws_target(target: str, **filters: str) -> Callable[[Request], bool]:
    """Match a JSON-protocol call by X-Amz-Target and, optionally, its Filters and NextToken."""
    def match(request: Request) -> bool:
        if request.headers.get("x-amz-target") != target:
            return False
        body = request.json()
        sent = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        want_token = filters.get("NextToken")
        return all(sent.get(k) == v for k, v in filters.items() if k != "NextToken") and (
            body.get("NextToken") == want_token)
    return match


def _fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_bytes())


def install_all(server: ReplayServer) -> dict[str, str]:
    """Routes answering every live source from the fixtures; returns the env pointing at them."""
    server.add("GET", "/api/retail/prices", file_reply("azure_page2.json"),
               when=lambda r: "$skip" in r.query)
    server.add("GET", "/api/retail/prices", file_reply("azure_page1.json"))
    skus = "/v1/services/6F81-5844-456A/skus"
    server.add("GET", skus, file_reply("gcp_page2.json"), when=lambda r: "pageToken" in r.query)
    server.add("GET", skus, file_reply("gcp_page1.json"))
    server.add("POST", "/api/v0/bundles/", file_reply("vast_bundles.json"))
    server.add("POST", "/graphql", file_reply("runpod_gpu_types.json"))
    server.add("GET", "/api/v1/instance-types", file_reply("lambda_instance_types.json"))
    base = "/skypilot-org/skypilot-catalog/master/catalogs/v8"
    for cloud_dir in sorted((FIXTURES / "skypilot").iterdir()):
        server.add("GET", f"{base}/{cloud_dir.name}/vms.csv",
                   Reply(200, (cloud_dir / "vms.csv").read_bytes(), {"Content-Type": "text/csv"}))
    page1 = _fixture_json("aws_get_products_page1.json")
    server.add("POST", "/", aws_json_reply(_fixture_json("aws_get_products_page2.json")),
               when=aws_target("AWSPriceListService.GetProducts",
                               productFamily="Compute Instance", NextToken=page1["NextToken"]))
    server.add("POST", "/", aws_json_reply(page1),
               when=aws_target("AWSPriceListService.GetProducts",
                               productFamily="Compute Instance"))
    server.add("POST", "/", aws_json_reply(_fixture_json("aws_get_products_gp3.json")),
               when=aws_target("AWSPriceListService.GetProducts", productFamily="Storage"))
    server.add("POST", "/", ec2_xml_reply("DescribeInstanceTypes",
                                          _fixture_json("aws_instance_types.json")),
               when=ec2_action("DescribeInstanceTypes"))
    server.add("POST", "/", ec2_xml_reply("DescribeSpotPriceHistory",
                                          _fixture_json("aws_spot_price_history.json")),
               when=ec2_action("DescribeSpotPriceHistory"))
    names = ("AWS", "AZURE", "GCP", "VAST", "RUNPOD", "LAMBDA", "SKYPILOT_HOSTED")
    env = {f"GPUCOST_{n}_URL": server.url for n in names}
    env.update(AWS_ACCESS_KEY_ID="testing-key-id", AWS_SECRET_ACCESS_KEY="testing-secret",
               AWS_DEFAULT_REGION="us-east-1", GOOGLE_API_KEY="gcp-test-key-123",
               VAST_API_KEY="vast-test-key-456", RUNPOD_API_KEY="runpod-test-key-789",
               LAMBDA_API_KEY="lambda-test-key-000")
    return env
