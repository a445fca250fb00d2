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

{{/* The Secret one of secret.refs (databasePassword, apiKey, keysFile) is read from: its own
name, or the release's Secret (the chart's or existingSecret). Call with (list $ "apiKey"). */}}
{{- define "emsquery.refSecret" -}}
{{- $root := index . 0 -}}
{{- $ref := index $root.Values.secret.refs (index . 1) -}}
{{- default (include "emsquery.secretName" $root) $ref.name -}}
{{- end -}}

{{/* Whether the pods mount a keys file. */}}
{{- define "emsquery.keysFile" -}}
{{- if or .Values.secret.refs.keysFile.name (and .Values.secret.existingSecret .Values.secret.existingSecretHasKeysFile) (and (not .Values.secret.existingSecret) .Values.secret.keysFile) -}}true{{- end -}}
{{- end -}}

{{- define "emsquery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "emsquery.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Seconds between SIGTERM and SIGKILL: the drain (APP__SHUTDOWN_DELAY), the requests in
flight (APP__SHUTDOWN_TIMEOUT) and 5 s for the process to exit. A smaller value set by hand
would kill requests the service is still finishing, so it stops the render. */}}
{{- define "emsquery.terminationGracePeriodSeconds" -}}
{{- $need := add (ceil (addf .Values.shutdown.delay .Values.shutdown.timeout) | int) 5 -}}
{{- $set := .Values.terminationGracePeriodSeconds | int -}}
{{- if eq $set 0 -}}
{{- $need -}}
{{- else if lt $set $need -}}
{{- fail (printf "terminationGracePeriodSeconds %d is less than shutdown.delay + shutdown.timeout + 5 = %d" $set $need) -}}
{{- else -}}
{{- $set -}}
{{- end -}}
{{- end -}}
