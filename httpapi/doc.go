// Package httpapi is the daemon's HTTP API and status page, served on a
// listener of its own (flaked serve --http-listen):
//
//	GET /v1/id              {"id":"<decimal>"}
//	GET /v1/ids?n=N         {"ids":["<decimal>", ...]}, N in 1..MaxBatch
//	GET /v1/parse/{id}      the decoding of an ID, as PARSE answers it
//	GET /v1/health          200 {"status":"ready",...} or 503 with the reason
//	GET /v1/openapi.json    the OpenAPI 3 document of all of these
//	GET /                   the status page (HTML), ?decode=ID decodes one
//
// IDs are JSON strings (a 63-bit ID does not fit JavaScript's numbers);
// every error is {"error":"<message>"} with its status: 400 for a bad
// argument naming the range, 401 without the token, 404 for an unknown
// path, 405 (with Allow) for another method, 503 when no ID can be issued
// safely. The routes are one table (routes.go), which openapi.json must
// match path for path and method for method: a test checks both ways and
// decodes each route's real answer against the document's schema.
//
// Named sequences (NEXTSEQ) go beside the IDs as GET /v1/seq/{tag}?n=N:
// a row of the routes table and a path of openapi.json, added with them.
package httpapi
