package k8s

import (
	"strings"
	"testing"
)

// Every object is named after its release: two releases in one namespace
// (each variant's values) render no kind and name in common, and none of
// either is named without its release's prefix.
func TestReleasesShareANamespace(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			seen := map[string]string{}
			for _, rel := range []string{release, "second"} {
				args := append([]string{"template", rel, chartDir(t), "--namespace", namespace}, setArgs(v.sets)...)
				out, err := helm(t, args...)
				if err != nil {
					t.Fatalf("helm template %s: %v", rel, err)
				}
				for _, o := range parse(t, out) {
					key := o.Kind + "/" + o.Metadata.Name
					if !strings.HasPrefix(o.Metadata.Name, rel+"-") {
						t.Errorf("release %s: %s is not named after the release", rel, key)
					}
					if other, ok := seen[key]; ok {
						t.Errorf("releases %s and %s both render %s", other, rel, key)
					}
					seen[key] = rel
				}
			}
		})
	}
}

// A release whose objects' names would pass 63 characters (a Service's or a
// Job's limit) is refused by the chart, naming the release and the object.
func TestLongReleaseNameRefused(t *testing.T) {
	// Helm allows release names of up to 53 characters.
	long, mid, id := strings.Repeat("r", 53), strings.Repeat("m", 15), strings.Repeat("t", 40)
	for _, c := range []struct {
		rel  string
		sets []string
		obj  string
	}{
		{long, nil, long + "-prometheus"},
		{mid, []string{"load.enabled=true", "load.testid=" + id}, mid + "-openloop-" + id},
	} {
		args := append([]string{"template", c.rel, chartDir(t), "--namespace", namespace}, setArgs(c.sets)...)
		_, err := helm(t, args...)
		if err == nil || !strings.Contains(err.Error(), "too long: the object \""+c.obj+"\" would have more than 63 characters") {
			t.Errorf("helm template %s %v: %v; want the chart's refusal naming %s", c.rel, c.sets, err, c.obj)
		}
	}
}
