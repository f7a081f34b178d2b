package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// openAPI is the part of an OpenAPI 3 document the checks read.
type openAPI struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
	Comps   struct {
		Schemas   map[string]schema `json:"schemas"`
		Responses map[string]struct {
			Content map[string]struct {
				Schema schema `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"components"`
}

type operation struct {
	Responses map[string]struct {
		Ref     string `json:"$ref"`
		Content map[string]struct {
			Schema schema `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

// schema is the subset of JSON Schema openapi.json uses; validate fails on
// a type it does not know.
type schema struct {
	Ref        string            `json:"$ref"`
	Type       string            `json:"type"`
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
	AddProps   *bool             `json:"additionalProperties"`
	Items      *schema           `json:"items"`
	Enum       []any             `json:"enum"`
	Pattern    string            `json:"pattern"`
	Minimum    *float64          `json:"minimum"`
	MinItems   *int              `json:"minItems"`
	Format     string            `json:"format"`
	Desc       string            `json:"description"`
}

func loadOpenAPI(t *testing.T, b []byte) *openAPI {
	t.Helper()
	var doc openAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: version %q, want 3.x", doc.OpenAPI)
	}
	return &doc
}

// operations lists "METHOD path" of the document, sorted.
func (d *openAPI) operations() []string {
	var out []string
	for p, ms := range d.Paths {
		for m := range ms {
			switch m {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// successSchema is the schema of an operation's 200 application/json
// answer, its $ref resolved.
func (d *openAPI) successSchema(method, path string) (schema, error) {
	raw, ok := d.Paths[path][strings.ToLower(method)]
	if !ok {
		return schema{}, fmt.Errorf("%s %s not in the document", method, path)
	}
	var op operation
	if err := json.Unmarshal(raw, &op); err != nil {
		return schema{}, err
	}
	r, ok := op.Responses["200"]
	if !ok {
		return schema{}, fmt.Errorf("%s %s: no 200 response", method, path)
	}
	c, ok := r.Content["application/json"]
	if !ok {
		return schema{}, fmt.Errorf("%s %s: 200 has no application/json content", method, path)
	}
	return c.Schema, nil
}

func (d *openAPI) errorSchema() schema { return schema{Ref: "#/components/schemas/Error"} }

// validate checks a decoded JSON value against s.
func (d *openAPI) validate(s schema, v any, at string) error {
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		ref, found := d.Comps.Schemas[name]
		if !ok || !found {
			return fmt.Errorf("%s: unresolved $ref %q", at, s.Ref)
		}
		return d.validate(ref, v, at)
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		return fmt.Errorf("%s: %v not one of %v", at, v, s.Enum)
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", at, v)
		}
		for _, k := range s.Required {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("%s: required %q missing", at, k)
			}
		}
		for k, fv := range m {
			ps, ok := s.Properties[k]
			if !ok {
				if s.AddProps != nil && !*s.AddProps {
					return fmt.Errorf("%s: property %q not in the schema", at, k)
				}
				continue
			}
			if err := d.validate(ps, fv, at+"."+k); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", at, v)
		}
		if s.MinItems != nil && len(a) < *s.MinItems {
			return fmt.Errorf("%s: %d items, want >= %d", at, len(a), *s.MinItems)
		}
		for i, e := range a {
			if err := d.validate(*s.Items, e, at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %T %v, want a string", at, v, v)
		}
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", at, str, s.Pattern)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || (s.Type == "integer" && f != float64(int64(f))) {
			return fmt.Errorf("%s: %T %v, want an %s", at, v, v, s.Type)
		}
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Errorf("%s: %v below %v", at, f, *s.Minimum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", at, v)
		}
	default:
		return fmt.Errorf("%s: schema type %q: the check knows object, array, string, integer, number, boolean", at, s.Type)
	}
	return nil
}

// routeOperations lists "METHOD pattern" of the handler's routes, sorted.
func routeOperations() []string {
	var out []string
	for _, rt := range routes {
		out = append(out, rt.method+" "+rt.pattern)
	}
	sort.Strings(out)
	return out
}

// The document served is openapi.json, and it describes the handler: the
// same paths and methods both ways, and each route's real success answer
// (from a running node over TCP) decodes against the document's schema,
// as do the errors against Error.
func TestOpenAPI_MatchesRoutes(t *testing.T) {
	n := standalone(t)
	s := serve(t, Options{Generator: n}, false)
	code, _, served := s.do(t, http.MethodGet, "/v1/openapi.json")
	if code != 200 || string(served) != string(openAPIDoc) {
		t.Fatalf("/v1/openapi.json: %d, %d bytes; want 200 and the embedded document", code, len(served))
	}
	doc := loadOpenAPI(t, served)
	if got, want := doc.operations(), routeOperations(); !slices.Equal(got, want) {
		t.Fatalf("openapi.json's operations %q\nthe handler's routes %q", got, want)
	}

	var id idBody
	s.getJSON(t, "/v1/id", 200, &id)
	requests := map[string]string{ // route pattern -> a request of it that succeeds
		"/v1/id": "/v1/id", "/v1/ids": "/v1/ids?n=3", "/v1/parse/{id}": "/v1/parse/" + id.ID,
		"/v1/health": "/v1/health", "/v1/openapi.json": "/v1/openapi.json",
	}
	for _, rt := range routes {
		path, ok := requests[rt.pattern]
		if !ok {
			t.Errorf("route %s: no request to check its answer with; add one here", rt.pattern)
			continue
		}
		sch, err := doc.successSchema(rt.method, rt.pattern)
		if err != nil {
			t.Error(err)
			continue
		}
		code, _, b := s.do(t, rt.method, path)
		var v any
		if code != 200 || json.Unmarshal(b, &v) != nil {
			t.Errorf("%s %s: %d %s", rt.method, path, code, b)
			continue
		}
		if err := doc.validate(sch, v, rt.method+" "+path); err != nil {
			t.Error(err)
		}
	}
	for _, path := range []string{"/v1/ids?n=0", "/v1/parse/x", "/v1/nope"} {
		_, _, b := s.do(t, http.MethodGet, path)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("GET %s: %s", path, b)
		}
		if err := doc.validate(doc.errorSchema(), v, "GET "+path); err != nil {
			t.Error(err)
		}
	}
}

// The checks have teeth: a route missing from the document, a document
// path without a route, and an answer with a field, a type or a pattern
// the schema does not allow are each reported.
func TestOpenAPI_ChecksCatchDrift(t *testing.T) {
	doc := loadOpenAPI(t, openAPIDoc)
	delete(doc.Paths, "/v1/health")
	if slices.Equal(doc.operations(), routeOperations()) {
		t.Error("a route missing from the document went unnoticed")
	}
	doc = loadOpenAPI(t, openAPIDoc)
	doc.Paths["/v1/seq/{tag}"] = map[string]json.RawMessage{"get": json.RawMessage(`{}`)}
	if slices.Equal(doc.operations(), routeOperations()) {
		t.Error("a documented path without a route went unnoticed")
	}
	doc = loadOpenAPI(t, openAPIDoc)
	sch, err := doc.successSchema("GET", "/v1/parse/{id}")
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"id": "1", "time": "2025-01-01T00:00:00.000Z", "tick": 1.0, "sequence": 0.0, "machine_id": 3.0, "mode": "flake"}
	if err := doc.validate(sch, good, "good"); err != nil {
		t.Fatalf("a valid decoding refused: %v", err)
	}
	for name, change := range map[string]func(m map[string]any){
		"extra field":   func(m map[string]any) { m["extra"] = 1.0 },
		"id as number":  func(m map[string]any) { m["id"] = 1.0 },
		"id not digits": func(m map[string]any) { m["id"] = "0x1" },
		"missing mode":  func(m map[string]any) { delete(m, "mode") },
		"unknown mode":  func(m map[string]any) { m["mode"] = "auto" },
		"tick fraction": func(m map[string]any) { m["tick"] = 1.5 },
	} {
		bad := map[string]any{}
		for k, v := range good {
			bad[k] = v
		}
		change(bad)
		if err := doc.validate(sch, bad, name); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
