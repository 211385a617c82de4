package metricsauth

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The filter's answers through a real API server (401, 403, 200, and a
// token the API server does not know) are shown by
// TestMetricsAnswerOnlyAuthorizedCallers in test/install.

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header string
		token  string
		ok     bool
	}{
		{header: "Bearer abc.def", token: "abc.def", ok: true},
		{header: "bearer abc", token: "abc", ok: true},
		{header: "Bearer   abc  ", token: "abc", ok: true},
		{header: ""},
		{header: "Bearer"},
		{header: "Bearer "},
		{header: "Basic YWxpY2U6c2VjcmV0"},
		{header: "abc"},
	} {
		t.Run(tc.header, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "/metrics", nil)
			assert.NoError(t, err)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			token, ok := bearerToken(req)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.token, token)
		})
	}
}
