{{/* vim: set filetype=mustache: */}}

{{- define "memstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: release-chart, or the release name alone when it already contains the chart name.
Kept at 50 characters so "<fullname>-worker-<ordinal>" stays a valid 63-character label.
*/}}
{{- define "memstream.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "memstream.workerName" -}}
{{- printf "%s-worker" (include "memstream.fullname" .) }}
{{- end }}

{{- define "memstream.apiName" -}}
{{- printf "%s-api" (include "memstream.fullname" .) }}
{{- end }}

{{- define "memstream.configName" -}}
{{- printf "%s-config" (include "memstream.fullname" .) }}
{{- end }}

{{- define "memstream.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "memstream.labels" -}}
helm.sh/chart: {{ include "memstream.chart" . }}
{{ include "memstream.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: memstream
{{- end }}

{{/* Labels shared by every pod of the release (worker and api). */}}
{{- define "memstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "memstream.workerSelectorLabels" -}}
{{ include "memstream.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "memstream.apiSelectorLabels" -}}
{{ include "memstream.selectorLabels" . }}
app.kubernetes.io/component: api
{{- end }}

{{- define "memstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memstream.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "memstream.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) }}
{{- end }}

{{/*
Every environment variable of memstream/settings.py that is not a secret. tests/deploy/test_helm.py
checks this list against Settings, so a new setting cannot be forgotten here.
*/}}
{{- define "memstream.settingNames" -}}
MEMSTREAM_DATA_DIR
MEMSTREAM_KAFKA_BOOTSTRAP
MEMSTREAM_KAFKA_SECURITY_PROTOCOL
MEMSTREAM_KAFKA_SASL_MECHANISM
MEMSTREAM_KAFKA_SASL_USERNAME
MEMSTREAM_KAFKA_SSL_CAFILE
MEMSTREAM_PROCESSING_GUARANTEE
MEMSTREAM_TOPIC_PREFIX
MEMSTREAM_PARTITIONS
MEMSTREAM_REPLICATION
MEMSTREAM_FETCH_MAX_WAIT_MS
MEMSTREAM_FETCH_IDLE_WAIT_MS
MEMSTREAM_GROUP_SESSION_TIMEOUT_S
MEMSTREAM_BROKER_MAX_MB
MEMSTREAM_DRAIN_SECONDS
MEMSTREAM_TURN_LOG
MEMSTREAM_TURN_LOG_RETENTION_DAYS
MEMSTREAM_CHECK_CITATIONS
MEMSTREAM_CODE_GONE_DAYS
MEMSTREAM_PREFETCH_BACKOFF_MS
MEMSTREAM_QDRANT_URL
MEMSTREAM_STORE_COLLECTION
MEMSTREAM_EDGE_INDEX_EVERY
MEMSTREAM_ANTHROPIC_BASE_URL
MEMSTREAM_ANTHROPIC_MODEL
MEMSTREAM_XAI_HOST
MEMSTREAM_XAI_MODEL
MEMSTREAM_GOOGLE_BASE_URL
MEMSTREAM_GOOGLE_MODEL
MEMSTREAM_LOCAL_LLM_URL
MEMSTREAM_LOCAL_LLM_MODEL
MEMSTREAM_LOCAL_LLM_DIALECT
MEMSTREAM_LOCAL_LLM_TIMEOUT
MEMSTREAM_LOCAL_LLM_IDLE_TIMEOUT
MEMSTREAM_LOCAL_LLM_CONCURRENCY
MEMSTREAM_LOCAL_LLM_CONTEXT
MEMSTREAM_LLM_PRIMARY
MEMSTREAM_LLM_TIMEOUT
MEMSTREAM_LLM_RETRIES
MEMSTREAM_LLM_BACKOFF
MEMSTREAM_LLM_BACKOFF_MAX
MEMSTREAM_LLM_CONCURRENCY
MEMSTREAM_RETRY_BUDGET
MEMSTREAM_EXTRACT_ATTEMPTS
MEMSTREAM_PARK_DELAY
MEMSTREAM_PARK_DELAY_MAX
MEMSTREAM_MIN_FACT_CONFIDENCE
MEMSTREAM_VOYAGE_BASE_URL
MEMSTREAM_VOYAGE_MODEL
MEMSTREAM_SNAPSHOT_MESSAGES
MEMSTREAM_SNAPSHOT_MAX_CHARS
MEMSTREAM_MESSAGE_MAX_CHARS
MEMSTREAM_SUMMARY_EVERY
MEMSTREAM_SESSION_SUMMARY_CAP
MEMSTREAM_EMBED_BATCH
MEMSTREAM_EMBED_BATCH_WINDOW
MEMSTREAM_EMBED_THREADS
MEMSTREAM_SHADOW_MODE
MEMSTREAM_ALLOW_UPDATE_DELETE
MEMSTREAM_MUTATIONS_FROZEN
MEMSTREAM_DECISION_ALPHA
MEMSTREAM_DECISION_MIN_SCORE
MEMSTREAM_GRAPH_ENABLED
MEMSTREAM_GRAPH_BOOST_WEIGHT
MEMSTREAM_GRAPH_BOOST_TIMEOUT_MS
MEMSTREAM_TOMBSTONE_RETENTION_DAYS
MEMSTREAM_HISTORY_RETENTION_DAYS
MEMSTREAM_WORDS_RETENTION_DAYS
MEMSTREAM_RETENTION_INTERVAL
MEMSTREAM_CLAUDE_DIR
MEMSTREAM_CODEX_DIR
MEMSTREAM_GEMINI_DIR
MEMSTREAM_KIMI_DIR
MEMSTREAM_KIMI_CODE_DIR
MEMSTREAM_WATCH
MEMSTREAM_WATCH_SWEEP
MEMSTREAM_RECALL_ALPHA
MEMSTREAM_RECALL_FLOOR
MEMSTREAM_RECALL_BM25_FLOOR
MEMSTREAM_RERANKER
MEMSTREAM_RERANKER_MODEL
MEMSTREAM_RERANKER_TOP_N
MEMSTREAM_RERANKER_TIMEOUT_MS
MEMSTREAM_CONSOLE_SESSION_HOURS
MEMSTREAM_EVENTS_BUFFER
MEMSTREAM_EVENTS_HEARTBEAT_S
MEMSTREAM_TRUSTED_PROXIES
MEMSTREAM_BLOCK_MAX_TOKENS
MEMSTREAM_AUTONOMOUS_ENABLED
MEMSTREAM_AUTONOMOUS_FROZEN
MEMSTREAM_MAINTENANCE_INTERVAL_MS
MEMSTREAM_MAINTENANCE_MODE
MEMSTREAM_REPAIR_REEMBED_COOLDOWN_MS
MEMSTREAM_REPAIR_REEMBED_HOURLY_BUDGET
MEMSTREAM_REPAIR_REQUEUE_COOLDOWN_MS
MEMSTREAM_REPAIR_REQUEUE_HOURLY_BUDGET
MEMSTREAM_DOCUMENT_WORKER_INTERVAL_MS
MEMSTREAM_DOCUMENT_CHUNK_SIZE
MEMSTREAM_DOCUMENT_CHUNK_OVERLAP
MEMSTREAM_DOCUMENT_MAX_CONTENT_BYTES
MEMSTREAM_PHASE1_IDLE_SECONDS
MEMSTREAM_PHASE1_MAX_AGE_DAYS
MEMSTREAM_PHASE1_CONCURRENCY
MEMSTREAM_PHASE1_SCAN_INTERVAL
MEMSTREAM_PHASE1_SCAN_LIMIT
MEMSTREAM_PHASE1_MAX_CHARS
MEMSTREAM_PHASE1_RETRY_DELAY
MEMSTREAM_PHASE1_RETRY_DELAY_MAX
MEMSTREAM_CONSOLIDATION_DEBOUNCE
MEMSTREAM_CONSOLIDATION_INTERVAL
MEMSTREAM_CONSOLIDATION_TOP_N
MEMSTREAM_CONSOLIDATION_MAX_UNUSED_DAYS
MEMSTREAM_CONSOLIDATION_RETRY_DELAY
MEMSTREAM_CONSOLIDATION_RETRY_DELAY_MAX
MEMSTREAM_HTTP_HOST
MEMSTREAM_HTTP_PORT
MEMSTREAM_USER
MEMSTREAM_TOKENS_FILE
MEMSTREAM_API_OPEN
MEMSTREAM_LOG_LEVEL
MEMSTREAM_TRACE_EXPORTER
{{- end }}

{{/* Where the tokens Secret is mounted (a directory: Kubernetes swaps its files atomically). */}}
{{- define "memstream.tokensDir" -}}
/etc/memstream/tokens
{{- end }}

{{/* The settings that hold secrets: only ever set from a secretKeyRef (MEMSTREAM_TOKEN: never in a pod). */}}
{{- define "memstream.secretSettingNames" -}}
ANTHROPIC_API_KEY
XAI_API_KEY
GOOGLE_API_KEY
VOYAGE_API_KEY
MEMSTREAM_QDRANT_API_KEY
MEMSTREAM_KAFKA_SASL_PASSWORD
MEMSTREAM_TOKEN
{{- end }}

{{/*
The ConfigMap's data as a dict: the structured values first, then .Values.config, refusing unknown
names, secret names and names the structured values already own.
*/}}
{{- define "memstream.configData" -}}
{{- if not .Values.kafka.bootstrap }}
{{- fail "kafka.bootstrap is required: with an empty MEMSTREAM_KAFKA_BOOTSTRAP every pod would start its own embedded, memory-only broker" }}
{{- end }}
{{- if not .Values.qdrant.url }}
{{- fail "qdrant.url is required: with an empty MEMSTREAM_QDRANT_URL every pod would keep its own in-process store" }}
{{- end }}
{{- if not .Values.kafka.topicPrefix }}
{{- fail "kafka.topicPrefix must not be empty (it is the topic prefix and the consumer group)" }}
{{- end }}
{{- $data := dict
  "MEMSTREAM_DATA_DIR" (toString .Values.persistence.mountPath)
  "MEMSTREAM_KAFKA_BOOTSTRAP" (toString .Values.kafka.bootstrap)
  "MEMSTREAM_KAFKA_SECURITY_PROTOCOL" (toString .Values.kafka.securityProtocol)
  "MEMSTREAM_KAFKA_SASL_MECHANISM" (toString .Values.kafka.sasl.mechanism)
  "MEMSTREAM_KAFKA_SASL_USERNAME" (toString .Values.kafka.sasl.username)
  "MEMSTREAM_KAFKA_SSL_CAFILE" (ternary "/etc/memstream/kafka-ca/ca.crt" "" (not (empty .Values.kafka.tls.caSecret)))
  "MEMSTREAM_TOPIC_PREFIX" (toString .Values.kafka.topicPrefix)
  "MEMSTREAM_PARTITIONS" (toString (int64 .Values.kafka.partitions))
  "MEMSTREAM_REPLICATION" (toString (int64 .Values.kafka.replication))
  "MEMSTREAM_FETCH_MAX_WAIT_MS" (toString (int64 .Values.kafka.fetchMaxWaitMs))
  "MEMSTREAM_QDRANT_URL" (toString .Values.qdrant.url)
  "MEMSTREAM_HTTP_HOST" (toString .Values.http.host)
  "MEMSTREAM_HTTP_PORT" (toString (int64 .Values.http.port))
  "MEMSTREAM_TOKENS_FILE" (printf "%s/%s" (include "memstream.tokensDir" .) "tokens.json")
  "MEMSTREAM_API_OPEN" "false"
  "MEMSTREAM_LOG_LEVEL" (toString .Values.logLevel)
  "MEMSTREAM_TRACE_EXPORTER" (ternary "otlp" "none" (not (empty .Values.tracing.otlpEndpoint)))
}}
{{- $known := splitList "\n" (include "memstream.settingNames" .) }}
{{- $secret := splitList "\n" (include "memstream.secretSettingNames" .) }}
{{- range $name, $value := .Values.config }}
{{- if has $name $secret }}
{{- fail (printf "config.%s is a secret: put it in a Secret and reference it (providers.existingSecret / qdrant.apiKey.existingSecret), never in values" $name) }}
{{- end }}
{{- if not (has $name $known) }}
{{- fail (printf "config.%s is not a memstream setting (see memstream/settings.py)" $name) }}
{{- end }}
{{- if hasKey $data $name }}
{{- fail (printf "config.%s is set by the chart's structured values; set those instead" $name) }}
{{- end }}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $_ := set $data $name (toString (int64 $value)) }}
{{- else }}
{{- $_ := set $data $name (toString (default "" $value)) }}
{{- end }}
{{- end }}
{{- toYaml $data }}
{{- end }}

{{/* Environment variables that come from Secrets (never literal values). */}}
{{- define "memstream.secretEnv" -}}
{{- $secretName := .Values.providers.existingSecret }}
{{- if $secretName }}
{{- range $env := list "ANTHROPIC_API_KEY" "XAI_API_KEY" "GOOGLE_API_KEY" "VOYAGE_API_KEY" }}
{{- $key := index $.Values.providers.secretKeys $env }}
{{- if $key }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secretName | quote }}
      key: {{ $key | quote }}
      optional: true
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.kafka.sasl.passwordSecret.name }}
- name: MEMSTREAM_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.passwordSecret.name | quote }}
      key: {{ .Values.kafka.sasl.passwordSecret.key | quote }}
      optional: true
{{- end }}
{{- if .Values.qdrant.apiKey.existingSecret }}
- name: MEMSTREAM_QDRANT_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.qdrant.apiKey.existingSecret | quote }}
      key: {{ .Values.qdrant.apiKey.key | quote }}
      optional: true
{{- end }}
{{- end }}

{{/*
The pod spec shared by workers and api pods.
Arguments: dict "root" $ "spec" <.Values.worker or .Values.api> "component" "worker"|"api" "volumes" <yaml>
*/}}
{{- define "memstream.podSpec" -}}
{{- $root := .root }}
{{- $spec := .spec }}
serviceAccountName: {{ include "memstream.serviceAccountName" $root }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
terminationGracePeriodSeconds: {{ int64 $spec.terminationGracePeriodSeconds }}
{{- with $spec.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $root.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: memstream
    image: {{ include "memstream.image" $root | quote }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    # Workers run the pipeline; api pods run the query-only `memstream api` (no consumer group).
    command:
      - memstream
      - {{ ternary "api" "up" (eq .component "api") }}
    ports:
      - name: http
        containerPort: {{ int64 $root.Values.http.port }}
        protocol: TCP
    envFrom:
      - configMapRef:
          name: {{ include "memstream.configName" $root }}
    env:
      - name: POD_NAME
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      {{- with $root.Values.tracing.otlpEndpoint }}
      - name: OTEL_EXPORTER_OTLP_ENDPOINT
        value: {{ . | quote }}
      - name: OTEL_RESOURCE_ATTRIBUTES
        value: "k8s.pod.name=$(POD_NAME),service.instance.id=$(POD_NAME)"
      {{- end }}
      {{- with include "memstream.secretEnv" $root | trim }}
      {{- . | nindent 6 }}
      {{- end }}
      {{- with $spec.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with $root.Values.probes.startup }}
    {{- if .enabled }}
    startupProbe:
      httpGet:
        path: {{ .path }}
        port: {{ int64 $root.Values.http.port }}
      periodSeconds: {{ int64 .periodSeconds }}
      timeoutSeconds: {{ int64 .timeoutSeconds }}
      failureThreshold: {{ int64 .failureThreshold }}
    {{- end }}
    {{- end }}
    {{- with $root.Values.probes.liveness }}
    {{- if .enabled }}
    livenessProbe:
      httpGet:
        path: {{ .path }}
        port: {{ int64 $root.Values.http.port }}
      initialDelaySeconds: {{ int64 .initialDelaySeconds }}
      periodSeconds: {{ int64 .periodSeconds }}
      timeoutSeconds: {{ int64 .timeoutSeconds }}
      failureThreshold: {{ int64 .failureThreshold }}
    {{- end }}
    {{- end }}
    {{- with $root.Values.probes.readiness }}
    {{- if .enabled }}
    readinessProbe:
      httpGet:
        path: {{ .path }}
        port: {{ int64 $root.Values.http.port }}
      initialDelaySeconds: {{ int64 .initialDelaySeconds }}
      periodSeconds: {{ int64 .periodSeconds }}
      timeoutSeconds: {{ int64 .timeoutSeconds }}
      failureThreshold: {{ int64 .failureThreshold }}
    {{- end }}
    {{- end }}
    {{- with $spec.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $root.Values.securityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
      - name: data
        mountPath: {{ $root.Values.persistence.mountPath }}
      - name: tmp
        mountPath: /tmp
      {{- if $root.Values.auth.tokens.existingSecret }}
      - name: tokens
        mountPath: {{ include "memstream.tokensDir" $root }}
        readOnly: true
      {{- end }}
      {{- if $root.Values.kafka.tls.caSecret }}
      - name: kafka-ca
        mountPath: /etc/memstream/kafka-ca
        readOnly: true
      {{- end }}
{{- if or .volumes $root.Values.auth.tokens.existingSecret $root.Values.kafka.tls.caSecret }}
volumes:
  {{- with .volumes }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with $root.Values.auth.tokens.existingSecret }}
  - name: tokens
    secret:
      secretName: {{ . | quote }}
      defaultMode: 0440
      items:
        - key: {{ $root.Values.auth.tokens.key | quote }}
          path: tokens.json
  {{- end }}
  {{- with $root.Values.kafka.tls.caSecret }}
  - name: kafka-ca
    secret:
      secretName: {{ . | quote }}
      items:
        - key: {{ $root.Values.kafka.tls.caKey | quote }}
          path: ca.crt
  {{- end }}
{{- end }}
{{- if $spec.affinity }}
affinity:
  {{- toYaml $spec.affinity | nindent 2 }}
{{- else if eq (toString $spec.podAntiAffinity) "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: {{ $spec.podAntiAffinityTopologyKey }}
          labelSelector:
            matchLabels:
              {{- include (printf "memstream.%sSelectorLabels" .component) $root | nindent 14 }}
{{- else if eq (toString $spec.podAntiAffinity) "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: {{ $spec.podAntiAffinityTopologyKey }}
        labelSelector:
          matchLabels:
            {{- include (printf "memstream.%sSelectorLabels" .component) $root | nindent 12 }}
{{- end }}
{{- with $spec.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $spec.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $spec.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "memstream.autoscaling" -}}
{{- if and .Values.autoscaling.keda.enabled .Values.autoscaling.hpa.enabled }}
{{- fail "enable at most one of autoscaling.keda and autoscaling.hpa" }}
{{- end }}
{{- if or .Values.autoscaling.keda.enabled .Values.autoscaling.hpa.enabled }}true{{ end }}
{{- end }}
