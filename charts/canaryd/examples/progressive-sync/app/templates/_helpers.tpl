{{/* The gate templates of files/progressive-sync-gate.yaml, by name, as JSON. */}}
{{- define "checkout.gateTemplates" -}}
{{- $byName := dict -}}
{{- range regexSplit "(?m)^---[ \t]*$" (.Files.Get "files/progressive-sync-gate.yaml") -1 -}}
{{- $t := fromYaml . -}}
{{- if and $t $t.metadata -}}
{{- $_ := set $byName $t.metadata.name $t -}}
{{- end -}}
{{- end -}}
{{- toJson $byName -}}
{{- end -}}
