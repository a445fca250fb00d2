{{/* The name of the release's objects. */}}
{{- define "emsquery.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the release's pods; never changed after the first install. */}}
{{- define "emsquery.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "emsquery.labels" -}}
{{ include "emsquery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "emsquery.secretName" -}}
{{- default (include "emsquery.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/* Whether the pods mount a keys file. */}}
{{- define "emsquery.keysFile" -}}
{{- if or .Values.secret.keysFile (and .Values.secret.existingSecret .Values.secret.existingSecretHasKeysFile) -}}true{{- end -}}
{{- end -}}
