{{/* Names and labels shared by every object of the release. */}}

{{- define "canaryd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "canaryd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "canaryd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "canaryd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "canaryd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "canaryd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "canaryd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "canaryd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The job label Prometheus gives the daemon's series: the ServiceMonitor's, else the metrics Service's name. */}}
{{- define "canaryd.metricsJob" -}}
{{- default (printf "%s-metrics" (include "canaryd.fullname" .)) .Values.metrics.serviceMonitor.job -}}
{{- end -}}

{{- define "canaryd.leaseName" -}}
{{- default (include "canaryd.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The rules canaryd needs wherever it watches AnalysisRuns: a Role per namespace or one ClusterRole. */}}
{{- define "canaryd.watchRules" -}}
- apiGroups: ["argoproj.io"]
  resources: ["analysisruns"]
  verbs: ["get", "list", "watch", "patch", "update", "delete"]
- apiGroups: ["argoproj.io"]
  resources: ["analysisruns/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["argoproj.io"]
  resources: ["analysistemplates"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.notifications.enabled }}
# notifications: a new leader lists the Events it may not have notified yet.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["list"]
{{- end }}
# job metrics: a Job per measurement, in the run's namespace, watched and deleted when the run terminates.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "get", "list", "watch", "delete"]
{{- if .Values.rollouts.enabled }}
# --rollouts: the Rollouts canaryd owns, the ReplicaSets and AnalysisRuns it creates for them, the Services they
# name (their selectors are pointed at the canary and stable ReplicaSets), and their pods (for restartAt and
# canaryMetadata/stableMetadata).
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["argoproj.io"]
  resources: ["rollouts/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["argoproj.io"]
  resources: ["analysisruns"]
  verbs: ["create"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "patch"]
# spec.restartAt: the Rollout's pods are listed (with its selector) while a restart is due, and evicted;
# canaryMetadata/stableMetadata: they are listed and their labels and annotations patched as their role changes.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "patch"]
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
{{- end }}
{{- if .Values.dashboard.enabled }}
# --dashboard-addr: the pages read each Rollout with what it owns and the Events about it, and watch for changes.
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods", "events"]
  verbs: ["list"]
{{- if .Values.dashboard.actions }}
# --dashboard-actions: promote, abort, retry and pause patch the Rollout or its status, as `canaryd abort` does.
- apiGroups: ["argoproj.io"]
  resources: ["rollouts", "rollouts/status"]
  verbs: ["patch"]
{{- end }}
{{- end }}
{{- if .Values.rbac.secrets }}
# Args with valueFrom.secretKeyRef are read at measurement time.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "canaryd.clusterTemplateRules" -}}
- apiGroups: ["argoproj.io"]
  resources: ["clusteranalysistemplates"]
  verbs: ["get", "list", "watch"]
{{- end -}}

{{/* The flags of `canaryd run` as a YAML list; tests/chart/verify.py runs them through --check-config. */}}
{{- define "canaryd.args" -}}
{{- $v := .Values -}}
{{- $args := list "run"
  (printf "--metrics-addr=0.0.0.0:%d" (int $v.metrics.port))
  (printf "--log-level=%s" $v.log.level)
  (printf "--log-format=%s" $v.log.format)
  (printf "--prometheus-max-concurrency=%d" (int $v.prometheus.maxConcurrency))
  (printf "--prometheus-share-window=%s" $v.prometheus.shareWindow)
  (printf "--leader-elect=%t" $v.leaderElection.enabled) -}}
{{- if $v.leaderElection.enabled -}}
{{- $args = concat $args (list
  (printf "--lease-name=%s" (include "canaryd.leaseName" .))
  (printf "--lease-duration=%s" $v.leaderElection.leaseDuration)
  (printf "--renew-deadline=%s" $v.leaderElection.renewDeadline)
  (printf "--retry-period=%s" $v.leaderElection.retryPeriod)) -}}
{{- end -}}
{{- range $v.watch.namespaces -}}
{{- $args = append $args (printf "--namespace=%s" .) -}}
{{- end -}}
{{- with $v.instanceId -}}
{{- $args = append $args (printf "--instance-id=%s" .) -}}
{{- end -}}
{{- if $v.rollouts.enabled -}}
{{- $args = concat $args (list "--rollouts=true"
  (printf "--rollout-threads=%d" (int $v.rollouts.threads))
  (printf "--traefik-api-group=%s" $v.rollouts.traefik.apiGroup)
  (printf "--traefik-api-version=%s" $v.rollouts.traefik.apiVersion)) -}}
{{- if $v.rbac.routers.alb -}}
{{- $args = append $args "--watch-alb-ingresses=true" -}}
{{- end -}}
{{- end -}}
{{- if $v.dashboard.enabled -}}
{{- $args = append $args (printf "--dashboard-addr=0.0.0.0:%d" (int $v.dashboard.port)) -}}
{{- if $v.dashboard.actions -}}
{{- $args = append $args "--dashboard-actions=true" -}}
{{- end -}}
{{- end -}}
{{- if not $v.notifications.enabled -}}
{{- $args = append $args "--notifications=false" -}}
{{- else if $v.notifications.selfService -}}
{{- $args = append $args "--self-service-notification-enabled=true" -}}
{{- end -}}
{{- with $v.prometheus.address -}}
{{- $args = append $args (printf "--prometheus=%s" .) -}}
{{- end -}}
{{- /* clap rejects a repeated flag, and a flag set behind the chart's back (--namespace) would escape RBAC. */ -}}
{{- $owned := dict "--metrics-addr" "metrics.port" "--log-level" "log.level" "--log-format" "log.format"
  "--prometheus-max-concurrency" "prometheus.maxConcurrency" "--prometheus-share-window" "prometheus.shareWindow"
  "--leader-elect" "leaderElection.enabled"
  "--lease-name" "leaderElection.leaseName" "--lease-duration" "leaderElection.leaseDuration"
  "--renew-deadline" "leaderElection.renewDeadline" "--retry-period" "leaderElection.retryPeriod"
  "--namespace" "watch.namespaces" "--instance-id" "instanceId" "--prometheus" "prometheus.address"
  "--rollouts" "rollouts.enabled" "--notifications" "notifications.enabled"
  "--rollout-threads" "rollouts.threads" "--watch-alb-ingresses" "rbac.routers.alb"
  "--traefik-api-group" "rollouts.traefik.apiGroup" "--traefik-api-version" "rollouts.traefik.apiVersion"
  "--notifications-namespace" "notifications.enabled"
  "--self-service-notification-enabled" "notifications.selfService"
  "--dashboard-addr" "dashboard.enabled" "--dashboard-actions" "dashboard.actions" -}}
{{- range $v.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" . "" -}}
{{- if hasKey $owned $flag -}}
{{- fail (printf "extraArgs: %s is set by the chart; use the value %s instead" $flag (get $owned $flag)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (concat $args $v.extraArgs) -}}
{{- end -}}

{{/* The traffic routers' kinds, each behind its rbac.routers value: what a Rollout's trafficRouting writes. */}}
{{- define "canaryd.routerRules" -}}
{{- if .Values.rbac.routers.istio }}
- apiGroups: ["networking.istio.io"]
  resources: ["virtualservices", "destinationrules"]
  verbs: ["get", "list", "watch", "update", "patch"]
{{- end }}
{{- if .Values.rbac.routers.nginx }}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
{{- end }}
{{- if .Values.rbac.routers.gatewayAPI }}
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "list", "watch", "update", "patch"]
{{- end }}
{{- if .Values.rbac.routers.smi }}
- apiGroups: ["split.smi-spec.io"]
  resources: ["trafficsplits"]
  verbs: ["get", "create", "patch"]
{{- end }}
{{- if .Values.rbac.routers.alb }}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "update"]
{{- end }}
{{- if .Values.rbac.routers.traefik }}
- apiGroups: [{{ .Values.rollouts.traefik.apiGroup | quote }}]
  resources: ["traefikservices"]
  verbs: ["get", "update"]
{{- end }}
{{- end -}}
