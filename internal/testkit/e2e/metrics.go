package e2e

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics scrapes base's /metrics with the bearer token as Prometheus
// does, and fails tb unless the answer is Prometheus text that passes
// promlint; it returns the metric families by name.
func Metrics(tb testing.TB, base, token string) map[string]*dto.MetricFamily {
	tb.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("/metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range problems {
		tb.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}
