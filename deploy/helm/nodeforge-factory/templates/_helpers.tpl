{{- define "factory.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "factory.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "factory.labels" -}}
{{ include "factory.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "factory.scheme" -}}
{{- if .Values.secrets.tls }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* The bundled registry's address inside the cluster: HOST:PORT. */}}
{{- define "factory.registry" -}}
{{- if not .Values.registry.bundled }}{{ fail "factory.registry names the bundled registry: set registry.bundled=true" }}{{ end -}}
{{ include "factory.fullname" . }}-registry.{{ .Release.Namespace }}.svc:{{ .Values.registry.port }}
{{- end -}}

{{/* The bundled registry's labels: a name of its own, so that the
factory's selectors (Deployment, Service, PodDisruptionBudget) never take
its pod. */}}
{{- define "factory.registrySelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-registry
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: registry
{{- end -}}

{{- define "factory.registryLabels" -}}
{{ include "factory.registrySelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.registry.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
