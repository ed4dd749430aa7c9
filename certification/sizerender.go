package certification

import (
	"fmt"
	"html/template"
	"io"
)

// JSON writes the size report (docs/schemas/size.schema.json).
func (s *SizeReport) JSON(w io.Writer) error { return indentedJSON(w, s) }

// Text writes the size report for a terminal: per artifact its totals,
// the rows of one list (by "package" or "dir"), the largest files and
// what the drop rules saved.
func (s *SizeReport) Text(w io.Writer, by string) {
	for i, a := range s.Artifacts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %d files, %s installed", a.Name, a.Files, humanBytes(a.Installed))
		if a.Image > 0 {
			fmt.Fprintf(w, ", %s in the squashfs data (%s image)", humanBytes(a.Squashfs), humanBytes(a.Image))
		}
		fmt.Fprintln(w)
		rows, title := a.ByPackage, "package"
		if by == "dir" {
			rows, title = a.ByDir, "directory"
		}
		fmt.Fprintf(w, "  %-52s %6s %12s %12s\n", "by "+title, "files", "installed", "squashfs")
		for _, r := range rows {
			fmt.Fprintf(w, "  %-52s %6d %12s %12s\n", r.Name, r.Files, humanBytes(r.Installed), humanBytes(r.Squashfs))
		}
		if len(a.Largest) > 0 {
			fmt.Fprintln(w, "  largest files:")
			for _, f := range a.Largest {
				fmt.Fprintf(w, "    %12s  %s (%s)\n", humanBytes(f.Installed), f.Path, f.Origin)
			}
		}
		for _, d := range a.Dropped {
			fmt.Fprintf(w, "  drop rule %s saved %d paths, %s\n", d.Rule, d.Paths, humanBytes(d.Bytes))
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 || n <= -1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 || n <= -1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// HTML writes the size picture: one self-contained page (no scripts, no
// external assets), bars as inline SVG.
func (s *SizeReport) HTML(w io.Writer) error {
	type chartData struct {
		Title  string
		Bars   []bar
		Height int
	}
	type art struct {
		A      SizeArtifact
		Charts []chartData
	}
	var arts []art
	for _, a := range s.Artifacts {
		pk, dir := map[string]int64{}, map[string]int64{}
		for _, r := range a.ByPackage {
			pk[r.Name] = r.Installed
		}
		for _, r := range a.ByDir {
			dir[r.Name] = r.Installed
		}
		c := []chartData{{Title: "installed bytes by package", Bars: chart(pk, 20)}, {Title: "installed bytes by directory", Bars: chart(dir, 20)}}
		for i := range c {
			c[i].Height = len(c[i].Bars)*22 + 4
		}
		arts = append(arts, art{A: a, Charts: c})
	}
	return sizePage.Execute(w, struct {
		Source string
		Arts   []art
	}{s.Source, arts})
}

// printCSS lays the reports out for paper: the whole width, every column
// wrapped rather than clipped, colours kept, rows not split.
const printCSS = `@media print{body{max-width:none;margin:0;padding:0;font-size:11px}table{font-size:10px}
tr,svg,.figures{break-inside:avoid}h2,h3{break-after:avoid}a{color:inherit;text-decoration:none}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}`

var sizePage = template.Must(template.New("size").Funcs(template.FuncMap{"bytes": humanBytes, "add": func(a, b int) int { return a + b },
	"print": func() template.CSS { return template.CSS(printCSS) }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Where the bytes go: {{.Source}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h2{margin-top:1.8em;border-bottom:1px solid #ccd;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:12.5px}
th,td{border:1px solid #d5d8e0;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.n{text-align:right;white-space:nowrap}
th{background:#eef0f5}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg{max-width:100%;height:auto}
{{print}}
</style></head>
<body>
<h1>Where the bytes go</h1>
<p>{{.Source}}</p>
<table id="summary"><tr><th>artifact</th><th>files</th><th>installed</th><th>squashfs data</th><th>image</th></tr>
{{range .Arts}}<tr><td>{{.A.Name}}</td><td class="n">{{.A.Files}}</td><td class="n">{{bytes .A.Installed}}</td><td class="n">{{if .A.Image}}{{bytes .A.Squashfs}}{{else}}—{{end}}</td><td class="n">{{if .A.Image}}{{bytes .A.Image}}{{else}}—{{end}}</td></tr>
{{else}}<tr><td colspan="5">none</td></tr>{{end}}</table>
{{range $art := .Arts}}<section>
<h2>{{.A.Name}}</h2>
<p>{{.A.Files}} files, {{bytes .A.Installed}} installed{{if .A.Image}}, {{bytes .A.Squashfs}} in the squashfs data ({{bytes .A.Image}} image){{end}}.</p>
{{range .Charts}}<h3>{{.Title}}</h3>
<svg width="900" height="{{.Height}}" role="img" aria-label="{{.Title}}">
{{range .Bars}}<text x="0" y="{{add .Y 15}}">{{.Label}}</text><rect x="330" y="{{add .Y 3}}" width="{{.Width}}" height="16" fill="#3b6fd4"/><text x="{{add .Width 336}}" y="{{add .Y 15}}">{{bytes .Value}}</text>
{{end}}</svg>
{{end}}
<h3>By package</h3>
<table><tr><th>package</th><th>files</th><th>installed</th><th>squashfs</th></tr>
{{range .A.ByPackage}}<tr><td>{{.Name}}</td><td class="n">{{.Files}}</td><td class="n">{{bytes .Installed}}</td><td class="n">{{if $art.A.Image}}{{bytes .Squashfs}}{{else}}—{{end}}</td></tr>
{{else}}<tr><td colspan="4">none</td></tr>{{end}}</table>
<h3>Largest files</h3>
<table><tr><th>path</th><th>from</th><th>installed</th><th>squashfs</th></tr>
{{range .A.Largest}}<tr><td>{{.Path}}</td><td>{{.Origin}}</td><td class="n">{{bytes .Installed}}</td><td class="n">{{if $art.A.Image}}{{bytes .Squashfs}}{{else}}—{{end}}</td></tr>
{{else}}<tr><td colspan="4">none</td></tr>{{end}}</table>
<h3>Drop rules</h3>
<table><tr><th>rule</th><th>paths</th><th>saved</th></tr>
{{range .A.Dropped}}<tr><td>{{.Rule}}</td><td class="n">{{.Paths}}</td><td class="n">{{bytes .Bytes}}</td></tr>
{{else}}<tr><td colspan="3">none</td></tr>{{end}}</table>
</section>{{end}}
</body></html>
`))
