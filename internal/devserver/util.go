package devserver

import (
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/log"
)

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describeNamespace(ns string) *workflowservice.DescribeNamespaceRequest {
	return &workflowservice.DescribeNamespaceRequest{Namespace: ns}
}

// nopLogger keeps the SDK quiet while the server is still coming up.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}

var _ log.Logger = nopLogger{}

// SearchAttributeFlags names search attributes, as the Temporal SDK types them, in the dev
// server's --search-attribute syntax (Config.SearchAttributes).
func SearchAttributeFlags(attrs map[string]enumspb.IndexedValueType) map[string]string {
	out := make(map[string]string, len(attrs))
	for name, t := range attrs {
		switch t {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			out[name] = "Keyword"
		case enumspb.INDEXED_VALUE_TYPE_TEXT:
			out[name] = "Text"
		case enumspb.INDEXED_VALUE_TYPE_INT:
			out[name] = "Int"
		case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
			out[name] = "Double"
		case enumspb.INDEXED_VALUE_TYPE_BOOL:
			out[name] = "Bool"
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			out[name] = "Datetime"
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
			out[name] = "KeywordList"
		}
	}
	return out
}
