//! Telling a Helm chart's template from a manifest: `validate` skips a file holding Go-template actions
//! outside quoted strings (`{{- if ...}}`, `name: {{ include ... }}`, `replicas: {{ .Values.n }}`) with a
//! note, since it is not YAML until Helm renders it. Placeholders stay inside quoted strings (Argo's
//! `"{{args.name}}"`, an ApplicationSet's `'{{.cluster}}'`), and a bare dotted or single name unquoted
//! (`{{args.name}}`, `{{window}}`) is a placeholder someone forgot to quote, which `validate` reports as such.

/// The first line (1-based) of `text` holding a Go-template action outside quoted strings, if any.
pub fn first_action_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            unquoted_openings(line)
                .into_iter()
                .any(|at| is_action(&line[at + 2..]))
        })
        .map(|i| i + 1)
}

/// Where `{{` opens outside single- and double-quoted strings, before any comment.
fn unquoted_openings(line: &str) -> Vec<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut out = Vec::new();
    for (at, c) in line.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && (at == 0 || line[..at].ends_with(' ')) => break,
            None if line[at..].starts_with("{{") => out.push(at),
            None => {}
        }
    }
    out
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
            "image: \"{{ .Values.image }}\"",
            "name: '{{.cluster}}-guestbook'",
            "env: '{{ index . \"env\" }}'",
            "# {{ .Values.commented }}",
            "query: up{job={{args.job}}}",
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
