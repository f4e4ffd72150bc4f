{{- define "relay.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "karpfunc.functionsName" -}}
{{- printf "%s-functions" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "relay.serviceAccountName" -}}
{{- default (include "relay.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "relay.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "relay.labels" -}}
{{ include "relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: karpfunc
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Fail early, with the value to set, instead of a relay that crash-loops. */}}
{{- define "relay.validate" -}}
{{- if not .Values.clusterName -}}
{{- fail "clusterName is required: set --set clusterName=<name of this cluster>" -}}
{{- end -}}
{{- if gt (len .Values.clusterName) 128 -}}
{{- fail "clusterName must be at most 128 characters (it is a Service Bus session ID)" -}}
{{- end -}}
{{- if and (not .Values.localBusURL) (not .Values.serviceBus.namespace) -}}
{{- fail "serviceBus.namespace is required (the Service Bus FQDN), unless localBusURL is set for development" -}}
{{- end -}}
{{- if not .Values.functions.principalId -}}
{{- fail "functions.principalId is required: the object (principal) ID of the karpfunc Functions' managed identity (az identity show --query principalId), the Kubernetes user AKS authenticates it as" -}}
{{- end -}}
{{- if not (regexMatch "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" .Values.functions.principalId) -}}
{{- fail (printf "functions.principalId %q is not an object ID (a GUID): use the managed identity's principalId, not its name or client ID" .Values.functions.principalId) -}}
{{- end -}}
{{- if and .Values.serviceBus.namespace (not .Values.localBusURL) (not .Values.serviceBus.clientId) -}}
{{- fail "serviceBus.clientId is required: the client ID of the managed identity federated with the relay's ServiceAccount" -}}
{{- end -}}
{{- end -}}
