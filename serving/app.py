"""The ASGI application of `seams serve`: FastAPI routes over the readers `seams search` uses.

FastAPI (on Starlette, served by uvicorn) because it writes the OpenAPI document from the same
pydantic models that check each request, so `/openapi.json` can never drift from what the
server accepts; Starlette and uvicorn already run Dagster's own UI here.

Every answer comes from published generations, like `seams search` (`Readers.search`, the very
function the command line calls). Endpoints are plain functions, run in the worker threads of
the server: the embedder and psycopg are synchronous. A request that meets a database gone away
(a restart) is tried once more on a fresh connection, then answered 503 in one line. Bad input
is a 4xx with one line (`{"error": "..."}`), never a 500.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from seams.errors import ConfigError, EmbeddingError, InputError, StorageError
from seams.resources.readers import Readers
from seams.serving import pages
from seams.serving.keys import ApiKeys
from seams.serving.metrics import CONTENT_TYPE, ServerMetrics
from seams.serving.tenant_pools import TenantPool, allow_set_role
from seams.settings import SeamsSettings
from seams.storage.document_view import document_view
from seams.storage.publication import published_seqs
from seams.storage.search import MAX_K, MAX_QUERY_CHARS
from seams.storage.tenants import assignments

log = logging.getLogger("seams.serve")

T = TypeVar("T")

MAX_BODY_BYTES = 64 * 1024
"""A request body larger than this is refused (413) before it is read whole."""
MAX_QUERY_TEXT = 4 * MAX_QUERY_CHARS
"""Longer queries are refused (422); up to it they are cut with a note, as `seams search` does."""
RETRY_PAUSE_S = 1.0
"""The pause before a request that met a database failure is tried again, once."""
MAX_BUDGET = 100_000
MAX_COLLECTIONS = 64


class SearchRequest(BaseModel):
    """`POST /search`: the arguments of `seams search --json`."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_TEXT, description="What to look for.")
    k: int = Field(5, ge=1, le=MAX_K, description="How many chunks.")
    budget: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET,
        description="Tokens: hits in rank order until the budget is full, touching hits merged "
        "(`spans`), instead of k hits.",
    )
    collections: list[str] | None = Field(
        None,
        min_length=1,
        max_length=MAX_COLLECTIONS,
        description="Search only these collections (default: every one the key may read).",
    )
    search: Literal["hybrid", "dense", "lexical"] | None = Field(
        None, description="Which scores rank the hits (default: the settings' retrieval.search)."
    )
    lexical_weight: float | None = Field(
        None, ge=0, le=1, description="BM25's share of the hybrid score (default: the settings')."
    )


class Failure(BaseModel):
    error: str


@dataclass
class ServerState:
    """What the application holds for its life: settings, readers, keys, pools, metrics."""

    settings: SeamsSettings
    readers: Readers
    keys: ApiKeys | None
    run_hint: str = "seams"
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    tenant_pools: dict[str, TenantPool] = field(default_factory=dict)
    max_connections: int = 8
    ready: bool = False
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        """Load the model (one query embedded: the session and tokenizer are warm) and, with
        keys, check that the login may act as every tenant and open their pools."""
        self.readers.check_model(self.run_hint)
        self.readers.embedder.embed_queries(["warm up"])
        with self.readers.postgres.connection() as conn:
            for tenant in self.keys.tenants if self.keys else ():
                allow_set_role(conn, tenant)
        url = self.readers.postgres.resolved_url()  # type: ignore[attr-defined]
        for tenant in self.keys.tenants if self.keys else ():
            self.tenant_pools[tenant] = TenantPool(url, tenant, self.max_connections)
        self.ready = True

    def stop(self) -> None:
        self.ready = False
        for pool in self.tenant_pools.values():
            pool.close()

    def database_answers(self) -> bool:
        try:
            with self.readers.postgres.connection() as conn:
                conn.execute("SELECT 1")
            return True
        except Exception as exc:  # any failure means not ready: one line says why
            log.warning("health: the database does not answer: %s", _one_line(exc))
            return False


class Refused(Exception):
    """A request answered with `status` and one line."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class Caller:
    """Who asks: a tenant (with its readers) or, without keys, the server's own login."""

    readers: Readers
    tenant: str | None


def caller(request: Request) -> Caller:
    """The caller of `request`: its key's tenant (401 without a known key) or, on a server
    without keys, the server's own login."""
    state: ServerState = request.app.state.seams
    if state.keys is None:
        return Caller(state.readers, None)
    header = request.headers.get("authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise Refused(
            401,
            "this server needs an API key: send `Authorization: Bearer KEY`",
            {"WWW-Authenticate": "Bearer"},
        )
    tenant = state.keys.tenant_for(presented.strip())
    if tenant is None:
        raise Refused(401, "the API key is not known", {"WWW-Authenticate": "Bearer"})
    return Caller(state.readers.with_postgres(state.tenant_pools[tenant]), tenant)


Who = Annotated[Caller, Depends(caller)]


def create_app(state: ServerState) -> FastAPI:
    """The application over `state` (started by its lifespan, stopped on shutdown)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Iterator[None]:  # type: ignore[misc]
        state.start()
        yield
        state.stop()

    app = FastAPI(
        title="Seams",
        summary="Search the published chunks of Seams, and look at where each chunk starts.",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI loads its scripts from a CDN; /openapi.json is the contract
        redoc_url=None,
    )
    app.state.seams = state
    _observe_requests(app, state)
    _answer_failures(app)
    _api_routes(app, state)
    _page_routes(app, state)
    return app


def _answer(state: ServerState, route: str, work: Callable[[], T]) -> T:
    """`work()`, once more after a database failure, then a 503; bad input a 400."""
    for attempt in (1, 2):
        try:
            return work()
        except (InputError, ConfigError) as exc:
            raise Refused(400, _one_line(exc)) from None
        except (StorageError, EmbeddingError) as exc:
            kind = "database" if isinstance(exc, StorageError) else "model"
            if attempt == 1 and kind == "database":
                log.info("%s: %s; trying once more", route, _one_line(exc))
                time.sleep(RETRY_PAUSE_S)  # a restarting server: give it a moment
                continue
            state.metrics.errors.labels(route, kind).inc()
            log.error("%s: %s", route, _one_line(exc))
            raise Refused(
                503, f"the {kind} is unavailable (the server's log says why); retry shortly"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _declared_for(who: Caller) -> list[str] | None:
    """A tenant's collections (what it may name); None: the settings' (no keys)."""
    if who.tenant is None:
        return None
    with who.readers.postgres.connection() as conn:
        return sorted(assignments(conn))


def _observe_requests(app: FastAPI, state: ServerState) -> None:
    """Every request, whatever its route: refused early when its body is too large, counted in
    flight (for a graceful stop), timed into the metrics, and a bug answered in one line."""

    @app.middleware("http")
    async def observe(request: Request, call_next: Callable[..., Any]) -> Response:
        started = time.perf_counter()
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            response: Response = JSONResponse(
                {"error": f"the request body is larger than {MAX_BODY_BYTES} bytes"}, 413
            )
        else:
            with state.lock:
                state.in_flight += 1
            try:
                response = await call_next(request)
            except Exception:  # a bug: one line to the client, the traceback to the log
                log.exception("%s %s failed", request.method, request.url.path)
                response = JSONResponse({"error": "internal error (the server's log says)"}, 500)
            finally:
                with state.lock:
                    state.in_flight -= 1
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        state.metrics.observe(path, request.method, response.status_code,
                              time.perf_counter() - started)  # fmt: skip
        return response


def _answer_failures(app: FastAPI) -> None:
    """Refusals and invalid requests as one line: `{"error": ...}` for the API, an error page
    for the HTML pages."""

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> Response:
        if _wants_html(request):
            return HTMLResponse(pages.error_page(str(exc)), exc.status, headers=exc.headers)
        return JSONResponse({"error": str(exc)}, exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        return JSONResponse({"error": _validation_line(exc)}, 400 if _json_error(exc) else 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)


def _api_routes(app: FastAPI, state: ServerState) -> None:
    """The JSON API, described in `/openapi.json`: search, a document's chunks, health and
    metrics."""
    failures: dict[int | str, dict[str, Any]] = {
        code: {"model": Failure} for code in (400, 401, 404, 413, 422, 503)
    }

    def run_search(who: Caller, body: SearchRequest) -> dict[str, Any]:
        response = who.readers.search(
            state.settings,
            body.query,
            body.k,
            budget=body.budget,
            collections=body.collections,
            search=body.search,
            lexical_weight=body.lexical_weight,
            option="collections:",
            declared=_declared_for(who),
        )
        return response.to_dict()

    @app.post("/search", responses=failures, summary="Search, as `seams search --json` does")
    def post_search(body: SearchRequest, who: Who) -> dict[str, Any]:
        """The answer `seams search QUERY --json` prints for the same arguments: hits with
        their scores, parent and neighbours, notes, and with a budget the packed spans."""
        return _answer(state, "/search", lambda: run_search(who, body))

    @app.get("/documents/{document_id}", responses=failures, summary="A document's chunks")
    def get_document(document_id: str, who: Who) -> dict[str, Any]:
        """The current chunks of one document, in order, with offsets, sizes, sections and the
        reason and similarity of the boundary each starts at."""
        _check_id(document_id)
        view = _answer(
            state, "/documents", lambda: document_view(who.readers.postgres, document_id)
        )
        if view is None:
            raise Refused(404, f"no current document {document_id!r}")
        return view.to_dict()

    @app.get("/health", summary="Ready when the model is loaded and the database answers")
    def health() -> JSONResponse:
        if not state.ready:
            return JSONResponse({"status": "starting"}, 503)
        if not state.database_answers():
            return JSONResponse({"status": "database unavailable"}, 503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    def metrics(who: Who) -> Response:
        def published() -> dict[str, int]:
            with who.readers.postgres.connection() as conn:
                return published_seqs(conn)

        return Response(state.metrics.render(_answer(state, "/metrics", published)), 200,
                        media_type=CONTENT_TYPE)  # fmt: skip


def _page_routes(app: FastAPI, state: ServerState) -> None:
    """The HTML pages a person reads in a browser (left out of the OpenAPI document): a search
    form with its hits, and a document with its chunk boundaries marked."""

    def search_response(who: Caller, body: SearchRequest) -> Any:
        return who.readers.search(
            state.settings, body.query, body.k, budget=body.budget, search=body.search,
            declared=_declared_for(who),
        )  # fmt: skip

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home(
        who: Who,
        q: Annotated[str, Query(max_length=MAX_QUERY_TEXT)] = "",
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 5,
        budget: Annotated[str, Query(max_length=12)] = "",
        search: Annotated[Literal["", "hybrid", "dense", "lexical"], Query()] = "",
    ) -> str:
        tokens = int(budget) if budget.strip().isdigit() and int(budget) > 0 else None
        if not q.strip():
            return pages.search_page(None, query=q, k=k, budget=tokens, search=search)
        body = SearchRequest(query=q, k=k, budget=tokens, search=search or None)
        try:
            response = _answer(state, "/", lambda: search_response(who, body))
        except Refused as exc:
            return pages.search_page(None, query=q, k=k, budget=tokens, search=search,
                                     error=str(exc))  # fmt: skip
        return pages.search_page(response, query=q, k=k, budget=tokens, search=search)

    @app.get("/view/{document_id}", response_class=HTMLResponse, include_in_schema=False)
    def view(document_id: str, who: Who, mark: Annotated[str, Query(max_length=40)] = "") -> str:
        _check_id(document_id)
        found = _answer(
            state, "/view", lambda: document_view(who.readers.postgres, document_id, with_text=True)
        )
        if found is None:
            raise Refused(404, f"no current document {document_id!r}")
        return pages.document_page(found, _mark(mark))


def _check_id(document_id: str) -> None:
    if not document_id or len(document_id) > 512 or "\x00" in document_id:
        raise Refused(400, "a document id is 1-512 characters without NUL")


def _mark(mark: str) -> tuple[int, int] | None:
    start, _, end = mark.partition(":")
    if start.isdigit() and end.isdigit() and int(start) <= int(end):
        return int(start), int(end)
    return None


def _wants_html(request: Request) -> bool:
    return request.url.path == "/" or request.url.path.startswith("/view/")


def _json_error(exc: RequestValidationError) -> bool:
    return any(e.get("type") == "json_invalid" for e in exc.errors())


def _validation_line(exc: RequestValidationError) -> str:
    """The first problem of a request, in one line: where, and what is wrong."""
    errors = exc.errors()
    if not errors:
        return "the request is not valid"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "the body"
    return f"{where}: {first.get('msg', 'is not valid')}"
