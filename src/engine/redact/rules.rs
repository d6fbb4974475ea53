//! What secrets look like, for [`super`]: the rule table, written from the formats themselves
//! (prefixes, lengths, alphabets and the context some of them need), the validators its rows
//! use, and the judgement of keys and values in keyword assignments.

/// How a rule finds its candidates.
pub(super) enum Find {
    /// A single-line regex. The secret is its first capture group that took part in the match,
    /// or the whole match when it has none.
    Re(&'static str),
    /// `KEY<sep>VALUE` where KEY holds one of these keywords (written with `_`; `-` or no
    /// separator also match), found from each trigger hit outwards and judged by `keyword_at`.
    Keyword(&'static [&'static str]),
    /// Private key blocks (PEM, OpenSSH, PGP, PuTTY), also cut at either end by a page boundary
    /// and in the JSON-escaped one-line form.
    KeyBlock,
    /// The values under `data:` / `stringData:` of a Kubernetes `kind: Secret` manifest.
    KubeSecret,
}

/// One row of the rule table.
pub(super) struct Rule {
    /// The kind shown in the marker; several rows may share one.
    pub name: &'static str,
    /// Precedence when candidates overlap: 0 key blocks, 1 token formats, 2 formats that need
    /// context, 3 keyword assignments. Lower wins; within a class the longer span, then the
    /// earlier row.
    pub class: u8,
    /// Lower-case literals of which at least one occurs in every match: the prefilter. Empty
    /// means the rule always runs (its regex has a rare literal prefix of its own).
    pub triggers: &'static [&'static str],
    pub find: Find,
    /// Extra judgement on the secret text, for formats a regex alone cannot pin down.
    pub check: Option<fn(&str) -> bool>,
}

const fn re(
    name: &'static str,
    class: u8,
    triggers: &'static [&'static str],
    check: Option<fn(&str) -> bool>,
    pattern: &'static str,
) -> Rule {
    Rule {
        name,
        class,
        triggers,
        find: Find::Re(pattern),
        check,
    }
}

const fn keyword(
    name: &'static str,
    triggers: &'static [&'static str],
    words: &'static [&'static str],
) -> Rule {
    Rule {
        name,
        class: 3,
        triggers,
        find: Find::Keyword(words),
        check: None,
    }
}

/// The built-in rules, most specific first.
#[rustfmt::skip]
pub(super) static RULES: &[Rule] = &[
    Rule { name: "private-key", class: 0, triggers: &["private key", "putty-user-key-file", "private-mac:"], find: Find::KeyBlock, check: None },
    // Token formats: a fixed prefix or shape is enough.
    re("aws-access-key-id", 1, &["akia", "asia", "abia", "acca", "a3t"], None,
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?-u:\b)"),
    re("github-token", 1, &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"], None,
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{82,240})(?-u:\b)"),
    re("gitlab-token", 1, &["glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glptt-", "glimt-", "gloas-", "glagent-", "gr1348941"], None,
        r"(?-u:\b)(?:gl(?:pat|dt|ft|soat|rt|cbt|ptt|imt|oas|agent)-|GR1348941)[A-Za-z0-9_-]{20,}"),
    re("slack-token", 1, &["xox", "xapp-"], None,
        r"(?-u:\b)(?:xox[abposre]-[0-9A-Za-z][0-9A-Za-z-]{8,}|xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+)"),
    re("slack-webhook", 1, &["hooks.slack.com/"], None,
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(T[A-Za-z0-9_]+/[A-Za-z0-9_]+/[A-Za-z0-9_/]+)"),
    re("stripe-key", 1, &["k_live_", "k_test_", "whsec_"], None,
        r"(?-u:\b)(?:[sr]k_(?:live|test)_[0-9A-Za-z]{24,}|whsec_[A-Za-z0-9+/]{32,})"),
    re("npm-token", 1, &["npm_", "_auth"], Some(looks_like_value),
        r#"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)|:?_auth(?:Token)?[ \t]*=[ \t]*["']?([^\s"'$\[<{][^\s"']*)"#),
    re("pypi-token", 1, &["pypi-ag"], None,
        r"pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}"),
    re("anthropic-key", 1, &["sk-ant-"], None,
        r"(?-u:\b)sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{20,}"),
    re("openai-key", 1, &["sk-"], None,
        r"(?-u:\b)sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{48}(?-u:\b)|[A-Za-z0-9_-]{0,40}T3BlbkFJ[A-Za-z0-9_-]{20,})"),
    re("google-api-key", 1, &["aiza"], None, r"(?-u:\b)AIza[0-9A-Za-z_-]{35}"),
    re("google-oauth", 1, &["gocspx-", "ya29."], None, r"GOCSPX-[A-Za-z0-9_-]{28}|(?-u:\b)ya29\.[A-Za-z0-9_-]{30,}"),
    re("huggingface-token", 1, &["hf_"], None, r"(?-u:\b)hf_[A-Za-z]{34,}(?-u:\b)"),
    re("jwt", 1, &["eyj"], Some(jwt_ok),
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.e[wy][A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    re("sendgrid-key", 1, &["sg."], None, r"(?-u:\b)SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    re("twilio-key", 1, &[], None, r"(?-u:\b)(?:AC|SK)[0-9a-f]{32}(?-u:\b)"),
    re("mailchimp-key", 1, &["-us"], None, r"(?-u:\b)[0-9a-f]{32}-us[0-9]{1,2}(?-u:\b)"),
    re("discord-token", 1, &[], Some(discord_ok),
        r"(?-u:\b)[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?-u:\b)"),
    re("discord-webhook", 1, &["/api/webhooks/"], None,
        r"discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_-]{60,})"),
    re("telegram-bot-token", 1, &[":aa"], None, r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?-u:\b)"),
    re("square-token", 1, &["sq0"], None, r"(?-u:\b)sq0(?:csp|atp|idp)-[0-9A-Za-z_-]{22,43}"),
    re("shopify-token", 1, &["shp"], None, r"(?-u:\b)shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    re("digitalocean-token", 1, &["_v1_"], None, r"(?-u:\b)do[opr]_v1_[a-f0-9]{64}"),
    re("vault-token", 1, &["hvs.", "hvb.", "hvr."], None, r"(?-u:\b)hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    // Formats that are secrets only in context: the key, header or URL around them.
    re("aws-secret-access-key", 2, &["secret"], None,
        r#"(?i:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)["']?[ \t]*(?:=|:=|=>|:)[ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#),
    re("aws-session-token", 2, &["token"], None,
        r#"(?i:(?:aws[_-]?)?(?:session|security)[_-]?token)["']?[ \t]*(?:=|:=|=>|:)[ \t]*["']?([A-Za-z0-9/+=]{100,})"#),
    re("azure-storage-key", 2, &["accountkey"], None, r"(?i:AccountKey)[ \t]*=[ \t]*([A-Za-z0-9+/]{86}==)"),
    re("azure-connection-string", 2, &["accesskey=", "sig="], None,
        r"(?i:SharedAccessKey|AccessKey|[?&;]sig)=([A-Za-z0-9%+/]{30,}=*)"),
    re("heroku-api-key", 2, &["heroku", "hrku-"], None,
        r#"HRKU-[A-Za-z0-9_-]{60}|(?i:heroku)[A-Za-z0-9_.-]*["']?[ \t]*[:=][ \t]*["']?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"#),
    re("docker-auth", 2, &["\"auth\""], Some(docker_auth_ok), r#""auth"[ \t]*:[ \t]*"([A-Za-z0-9+/]{6,}=*)""#),
    re("basic-auth", 2, &["authorization", "-u ", "-u\t", "--user"], Some(strict_value),
        r#"(?i:authorization)["']?[ \t]*[:=][ \t]*["']?(?i:basic)[ \t]+([A-Za-z0-9+/]{6,}=*)|(?:^|[ \t])(?:-u|--user)[ \t]+["']?[^\s:"'@]+:([^\s"'\[@]+)["']?(?:[ \t]|$)"#),
    re("bearer-token", 2, &["authorization", "bearer"], Some(strict_value),
        r#"(?:(?i:authorization)["']?[ \t]*[:=][ \t]*["']?(?i:bearer|token)|(?i:(?-u:\b)bearer))[ \t]+([A-Za-z0-9._~+/-]{8,}=*)"#),
    // Also with JSON's escaped slashes (`https:\/\/user:pass@host`).
    re("url-password", 2, &["://", ":\\/\\/"], Some(looks_like_value),
        r#"[A-Za-z][A-Za-z0-9+.-]*:(?://|\\/\\/)[^\s:/?#@\[\]"'<>\\]*:([^\s/?#@\[\]"'<>\\]+)@"#),
    // Go's DSN: `user:pass@tcp(host:3306)/db`.
    re("url-password", 2, &["@tcp(", "@unix(", "@udp("], Some(looks_like_value),
        r#"[A-Za-z0-9_.$-]+:([^\s:@/"'\[]+)@(?:tcp|unix|udp)\("#),
    // A query string's credential: `?key=`, `&sig=` (Azure SAS), `&signature=`, `&password=`.
    re("url-credential", 2, &["key=", "sig=", "signature=", "secret=", "password=", "passwd="], Some(strict_value),
        r#"[?&](?i:key|apikey|api_key|sig|signature|x-amz-signature|x-goog-signature|secret|client_secret|password|passwd)=([^&\s"'#<>\[]{8,})"#),
    // Cookies: every value of a `Cookie:` header, the value of a `Set-Cookie:` one.
    re("cookie", 2, &["cookie"], Some(looks_like_value),
        r#"(?:^|[^A-Za-z0-9-])(?i:cookie)["']?[ \t]*:[ \t]*["']?((?:[^=;\s"']+=[^;\s"']*(?:;[ \t]*)?)+)"#),
    re("cookie", 2, &["set-cookie"], Some(looks_like_value),
        r#"(?i:set-cookie)["']?[ \t]*:[ \t]*["']?[^=;\s"']+=([^;\s"'\[]+)"#),
    // Short password flags: `mysql -pSECRET`, `sshpass -p SECRET`, `redis-cli -a SECRET`,
    // `docker login -p SECRET`.
    re("password", 2, &["mysql", "mariadb"], Some(looks_like_value),
        r#"(?-u:\b)(?:mysql|mariadb)[A-Za-z-]*(?:[ \t]+[^\s|;&]+)*?[ \t]+-p["']?([^\s"']+)"#),
    re("password", 2, &["sshpass"], Some(looks_like_value),
        r#"(?-u:\b)sshpass[ \t]+-p[ \t]*["']?([^\s"']+)"#),
    re("password", 2, &["redis-cli"], Some(looks_like_value),
        r#"(?-u:\b)redis-cli(?:[ \t]+[^\s|;&]+)*?[ \t]+-a[ \t]+["']?([^\s"']+)"#),
    re("password", 2, &["login"], Some(looks_like_value),
        r#"(?-u:\b)(?:docker|podman|buildah|skopeo|nerdctl|oras|registry)[ \t]+login(?:[ \t]+[^\s|;&]+)*?[ \t]+-p[ \t]*["']?([^\s"']+)"#),
    re("password", 2, &["login"], Some(looks_like_value), r"(?-u:\b)login[ \t]+[^\s]+[ \t]+password[ \t]+([^\s\[]+)"),
    Rule { name: "kubernetes-secret", class: 2, triggers: &["kind: secret"], find: Find::KubeSecret, check: None },
    // Keyword assignments, judged in code; the first family whose keyword the key holds names it.
    keyword("password", &["pass", "pwd"], &["password", "passwd", "passphrase", "pwd", "db_pass", "database_pass", "key_pass"]),
    keyword("api-key", &["key"], &["api_key", "access_key", "auth_key", "service_key", "account_key", "client_key", "db_key", "database_key", "master_key", "encryption_key", "signing_key", "subscription_key"]),
    keyword("private-key", &["key"], &["private_key", "priv_key"]),
    keyword("secret", &["secret"], &["secret"]),
    keyword("token", &["token"], &["token"]),
];

// ---------------------------------------------------------------------------------------------
// Keys and values of keyword assignments

/// Words that, as a value, say something *about* a secret rather than being one.
const STOP_VALUES: &str = "\
    null nil none undefined true false yes no on off empty unset unknown required optional \
    missing invalid hidden masked string str bool boolean int integer number object any \
    bytes text default latest next stable bearer basic sha1 sha256 sha512 md5 base64 utf8 \
    oauth2 redacted prompt stdin env file";

/// Last key segments that make the key metadata about a secret (`TOKEN_URL`, `password_file`,
/// `secretName`, `max_tokens`-style counters) rather than the secret itself.
const META_SEGMENTS: &str = "\
    type name names url uri urls endpoint host file files path dir length len size count \
    limit ttl expiry expires expiration exp timeout policy version env var header format \
    prefix suffix mode label hint prompt placeholder field input enabled required set \
    present provided missing valid invalid error errors usage used stdin cmd command helper \
    manager kind source scope scopes audience issuer algorithm alg location region arn ref \
    index budget min max parallelism rotation store backend provider text title message hash";

/// Whether a key names a secret: it holds one of `words` ending at a word boundary, and what
/// follows is not metadata (`TOKEN_URL`, `password_file`).
pub(super) fn key_names_secret(key: &str, words: &[&str]) -> bool {
    let b = key.as_bytes();
    // A keyword ends at a boundary: end, a non-letter, a camelCase hump, or a plural `s` first.
    let boundary = |i: usize| match b.get(i) {
        None => true,
        Some(c) if !c.is_ascii_alphabetic() => true,
        Some(c) => c.is_ascii_uppercase() && b[i - 1].is_ascii_lowercase(),
    };
    (0..b.len()).any(|at| {
        words.iter().any(|w| {
            word_end(b, at, w.as_bytes()).is_some_and(|mut end| {
                if !boundary(end) && b[end] | 0x20 == b's' && boundary(end + 1) {
                    end += 1;
                }
                boundary(end) && !last_segment_is_meta(&key[end..])
            })
        })
    })
}

/// Where `word` (lower case; its `_` matches `_`, `-` or nothing) ends in `key` if it starts at
/// `at`, ignoring case.
fn word_end(key: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    let mut k = at;
    for &c in word {
        match key.get(k) {
            Some(&x) if x.to_ascii_lowercase() == c || (c == b'_' && x == b'-') => k += 1,
            _ if c == b'_' => {}
            _ => return None,
        }
    }
    Some(k)
}

fn last_segment_is_meta(rest: &str) -> bool {
    let bytes = rest.as_bytes();
    let mut start = 0;
    for i in 0..bytes.len() {
        if !bytes[i].is_ascii_alphanumeric() {
            start = i + 1;
        } else if i > 0 && bytes[i].is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase() {
            start = i;
        }
    }
    let last = &rest[start.min(rest.len())..];
    !last.is_empty() && is_word_in(META_SEGMENTS, last)
}

/// Whether `word` is one of the space-separated `list`, ignoring ASCII case.
fn is_word_in(list: &str, word: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// ASCII-case-insensitive substring test (for short values only).
fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// Whether a value in a keyword assignment is a secret and not a placeholder, a reference or
/// prose. `strict` applies where the syntax is ambiguous (`key: value` in YAML or prose, code's
/// `a.password = b`, `--flag value`): then a value also needs a digit or symbol, or length and
/// mixed case, and some entropy. Quoted and env-style values (`PASSWORD=sunshine`) are
/// redacted even when weak, as detect-secrets flags them.
pub(super) fn value_is_secret(value: &str, strict: bool) -> bool {
    if !looks_like_value(value) || value.len() < 3 || value.chars().any(char::is_whitespace) {
        return false;
    }
    if is_word_in(STOP_VALUES, value) || !value.bytes().any(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let has_digit = value.bytes().any(|b| b.is_ascii_digit());
    // `self.password`, `newPassword`, `DB_PASSWORD`: a name of the secret, not the secret.
    let names_secret = value.len() <= 64
        && ["pass", "secret", "token", "key", "pwd"]
            .iter()
            .any(|w| contains_ci(value, w));
    if names_secret && !has_digit {
        return false;
    }
    let dotted = value.split('.').count() > 1
        && value.split('.').all(|p| {
            p.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
        });
    let version = value
        .trim_start_matches(['^', '~', '>', '<', '=', 'v'])
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit())
        && value.contains('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-+^~<>=*x".contains(&b));
    if dotted || version {
        return false;
    }
    !strict || strict_value(value)
}

/// The stricter test: at least 6 characters with a digit or symbol among the letters (or 10 of
/// mixed case that are not a CamelCase word like `TokenStream`), and not one repeated pattern.
pub(super) fn strict_value(value: &str) -> bool {
    if !looks_like_value(value) || value.len() < 6 {
        return false;
    }
    let b = value.as_bytes();
    let (upper, lower, digit) = (
        b.iter().any(u8::is_ascii_uppercase),
        b.iter().any(u8::is_ascii_lowercase),
        b.iter().any(u8::is_ascii_digit),
    );
    let symbol = b
        .iter()
        .any(|c| c.is_ascii_punctuation() && !b"-_.".contains(c));
    let camel_word = b.iter().all(u8::is_ascii_alphabetic)
        && b.windows(2)
            .all(|w| !(w[0].is_ascii_uppercase() && w[1].is_ascii_uppercase()))
        && !b[b.len() - 1].is_ascii_uppercase();
    let snake = lower
        && !upper
        && value.contains('_')
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    let mixed = !snake
        && (upper || lower)
        && (digit || symbol || (upper && lower && value.len() >= 10 && !camel_word));
    mixed && shannon_bits(value) >= 2.0
}

/// Rejects placeholders and templating: `$VAR`, `${VAR}`, `<token>`, `{{ x }}`, `%s`, `***`,
/// `xxxx`, `YOUR_API_KEY`, `your-token-here`, `...`, and markers from an earlier redaction.
pub(super) fn looks_like_value(value: &str) -> bool {
    let v = value.trim();
    let Some(first) = v.bytes().next() else {
        return false;
    };
    let one_char = v.bytes().all(|b| b == first || !b.is_ascii_alphanumeric());
    let all_caps_name = v.contains('_')
        && v.bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit());
    let path = v.starts_with(['/', '~'])
        || v.starts_with("./")
        || v.starts_with("../")
        || v.contains("://")
        || (v.len() > 2 && v.as_bytes()[1] == b':' && v.as_bytes()[2] == b'\\');
    !(b"$%<{[#@*`.".contains(&first)
        || one_char
        || all_caps_name
        || path
        || v.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("your"))
        || (v.len() <= 256 && contains_ci(v, "redacted"))
        || v.contains("...")
        || v.contains("***")
        || v.contains("{{"))
}

fn shannon_bits(s: &str) -> f64 {
    let mut freq = [0u32; 256];
    for b in s.bytes() {
        freq[b as usize] += 1;
    }
    let n = s.len() as f64;
    freq.iter()
        .filter(|&&c| c > 0)
        .map(|&c| -(c as f64 / n) * (c as f64 / n).log2())
        .sum()
}

/// Decodes standard or URL-safe base64, with or without padding; `None` if it is not base64.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in s.trim_end_matches('=').bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A JWT's header is a JSON object; anything else that happens to start with `eyJ` is not one.
pub(super) fn jwt_ok(token: &str) -> bool {
    let header = token
        .split('.')
        .next()
        .and_then(base64_decode)
        .unwrap_or_default();
    header.first() == Some(&b'{')
        && header.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'}')
}

/// A Discord bot token starts with the bot's numeric id in base64.
pub(super) fn discord_ok(token: &str) -> bool {
    let id = token
        .split('.')
        .next()
        .and_then(base64_decode)
        .unwrap_or_default();
    (15..=21).contains(&id.len()) && id.iter().all(u8::is_ascii_digit)
}

/// Docker's `"auth"` is base64 of `user:password`.
pub(super) fn docker_auth_ok(value: &str) -> bool {
    base64_decode(value).is_some_and(|d| d.contains(&b':'))
}
