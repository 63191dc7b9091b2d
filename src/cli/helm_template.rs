//! Telling a Helm chart's template from a manifest: `validate` skips a file holding Go-template actions
//! (`{{ .Values.x }}`, `{{- if ...}}`, `{{ include ... }}`) with a note, since it is not YAML until Helm renders
//! it; Argo's placeholders (`{{args.name}}`, `{{ metrics.x }}`), which a manifest holds, are not actions.

/// The first line (1-based) of `text` holding a Go-template action, if any.
pub fn first_action_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            line.match_indices("{{")
                .any(|(at, _)| is_action(&line[at + 2..]))
        })
        .map(|i| i + 1)
}

/// Whether what follows a `{{` is a Go-template action rather than a placeholder. Argo's placeholders are a
/// dotted name (`args.service`), canaryd/compare's a bare one (`window`); an action trims space (`{{-`), starts
/// with a field, variable, comment or parenthesis (`.Values`, `$x`, `/*`, `(`), is a keyword that stands alone
/// (`end`, `else`), or is a keyword or function given arguments (`if .x`, `include "name" .`).
fn is_action(after: &str) -> bool {
    if after.starts_with('-') {
        return true;
    }
    let body = after.trim_start();
    if body.starts_with(['.', '$', '(']) || body.starts_with("/*") {
        return true;
    }
    let word_end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (word, rest) = body.split_at(word_end);
    if word.is_empty() || rest.starts_with('.') {
        return false;
    }
    let rest = rest.trim_start();
    matches!(word, "end" | "else" | "break" | "continue") || !rest.starts_with("}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_actions_are_found_and_argo_placeholders_are_not() {
        for helm in [
            "image: {{ .Values.image }}",
            "{{- if .Values.enabled }}",
            "  {{ include \"chart.labels\" . | nindent 4 }}",
            "{{ toYaml .Values.resources }}",
            "{{ $name := .Release.Name }}",
            "{{/* a comment */}}",
            "{{ end }}",
        ] {
            assert_eq!(first_action_line(helm), Some(1), "{helm}");
        }
        for argo in [
            "query: up{service=\"{{args.service}}\"}",
            "url: \"http://x/{{ args.path }}\"",
            "value: \"{{metrics.rate}}\"",
            "query: sum(increase(e[{{window}}]))",
            "query: sum(increase(e[{{ window }}]))",
            "no braces at all",
        ] {
            assert_eq!(first_action_line(argo), None, "{argo}");
        }
        assert_eq!(first_action_line("a: 1\nb: {{ .Values.b }}\n"), Some(2));
    }
}
