"""What the scan looks for, as patterns matched on the skeleton (case-insensitively): override and
concealment phrases in English, Chinese and eight more languages, pseudo-system tags, secrets,
exfiltration, padding; and the sizes past which a description is reported."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from index.trust.scan.text import WIDE_SPACES, skeleton


_F = re.IGNORECASE
_SENTENCE = r"(?:[^.\n!?。！？]|[.!?](?=\S))"

OVERRIDE = re.compile(
    r"\b(ignore|disregard|forget|override|bypass|overrule)\b" + _SENTENCE + r"{0,40}?"
    r"\b(previous|prior|above|earlier|preceding|all|any|other|system|original|existing|your|safety)\b"
    + _SENTENCE
    + r"{0,30}?\b(instructions?|prompts?|rules|guidelines|directives|messages|guardrails|constraints|polic(y|ies))\b",
    _F,
)
#: The override with its noun first: "ignore the instructions above", "disregard the prompt you were
#: given". Only nouns that name what a model was told: "ignore lint rules above level 3" is no attack.
OVERRIDE_NOUN_FIRST = re.compile(
    r"\b(ignore|disregard|forget|override|bypass|overrule)\b" + _SENTENCE + r"{0,20}?"
    r"\b(instructions|prompts?|directives|guidelines|guardrails)\b" + _SENTENCE + r"{0,20}?"
    r"\b(above|before\s+this|so\s+far|you\s+(were|have\s+been)\s+given|you\s+(got|received|have))\b",
    _F,
)
CONCEAL_TELL = re.compile(
    r"\b(do not|don'?t|dont|never|must not|should not|shouldn'?t|cannot|without|avoid)\s+(ever\s+)?"
    r"(let(ting)?\s+(the\s+)?(users?|human|person|operator|owner)\s+(know|see|notice|find\s+out)\b|"
    r"(tell(ing)?|inform(ing)?|notify(ing)?|alert(ing)?|mention(ing)?|reveal(ing)?|disclos(e|ing)|show(ing)?|warn(ing)?|"
    r"report(ing)?|explain(ing)?)\b" + _SENTENCE + r"{0,30}?\b(the\s+)?(users?|human|person|operator|owner)\b)",
    _F,
)
CONCEAL_KNOW = re.compile(
    r"\b(users?|human)\b" + _SENTENCE + r"{0,20}?\b(must|should|shall|will|need|may)\s*(not|never|n't)\s+"
    r"(know|see|notice|find out|learn|be\s+(told|informed|aware|notified|shown|alerted))\b",
    _F,
)
CONCEAL_HIDE = re.compile(
    r"\b(keep|hide|conceal|mask)\b" + _SENTENCE + r"{0,40}?\bfrom\s+the\s+(users?|human)\b", _F
)
STEALTH = re.compile(
    r"\b(silently|secretly|covertly|stealthily|quietly|invisibly|discreetly)\b" + _SENTENCE + r"{0,30}?"
    r"\b(send|read|include|add|forward|upload|copy|exfiltrate|call|pass|post|append|attach|transmit|leak|bcc|cc)\b",
    _F,
)
OVERRIDE_ZH = re.compile(
    r"(忽略|无视|無視|忘记|忘記|忘掉|不要理会|不要理會)(之前|以前|先前|上面|上述|前面|所有|一切|系统|系統|原有)(的)?(所有|全部|一切)?(的)?"
    r"(指令|指示|说明|說明|规则|規則|提示|设定|設定|要求)"
)


def _override_words(verbs: str, qualifiers: str, nouns: str, *, verb_last: bool = False) -> str:
    """An override in another language: "ignore" then "all previous instructions" (either word order
    of the two), and, for a language that may put the verb last, "all previous instructions ignore"."""
    s = _SENTENCE
    first = rf"(?:{verbs}){s}{{0,40}}?(?:(?:{qualifiers}){s}{{0,25}}?(?:{nouns})|(?:{nouns}){s}{{0,25}}?(?:{qualifiers}))"
    return first + (rf"|(?:{qualifiers}){s}{{0,25}}?(?:{nouns}){s}{{0,30}}?(?:{verbs})" if verb_last else "")


#: The override in the other languages an attacker may write it in (English and Chinese above):
#: Spanish, Portuguese, Italian, French, German, Russian, Japanese, Korean; each with its gate
#: (:data:`_GATES`), so a text without what it needs is not searched for it.
_OVERRIDE_OTHER_LANGUAGES = (
    (
        "latin-override",
        _override_words(
            r"\b(?:ignora|ignore|ignoren|ignorem|ignorate|ignori|ignorez|ignorer|olvida|olvide|olviden|omite|descarta|"
            r"esque[çc]a|esque[çc]am|desconsidere|dimentica|dimentichi|dimenticate|oublie[rz]?|"
            r"ne\s+tiens\s+pas\s+compte|ne\s+tenez\s+pas\s+compte)\b",
            r"\b(?:anteriores|previas|pr[ée]vias|precedentes|precedenti|todas|tutte|toutes|pr[ée]c[ée]dentes|"
            r"ant[ée]rieures|ci-dessus)\b",
            r"\b(?:instrucciones|indicaciones|reglas|instru[çc][õo]es|regras|orienta[çc][õo]es|istruzioni|regole|"
            r"indicazioni|instructions|consignes|r[èe]gles|directives)\b",
        ),
    ),
    (
        "latin-override",
        _override_words(
            r"\b(?:ignorier\w*|vergiss|vergessen|missachte\w*)\b",
            r"\b(?:vorherige\w*|bisherige\w*|fr[üu]here\w*|obige\w*|alle)\b",
            r"\b(?:anweisungen|instruktionen|regeln|befehle|vorgaben)\b",
            verb_last=True,
        ),
    ),
    (
        "cyrillic",
        _override_words(
            r"(?:игнорируй\w*|игнорировать|забудь\w*|забыть|не\s+обращай\w*\s+внимани\w*)",
            r"(?:предыдущ\w*|прежн\w*|вс[еёя]\w*|системн\w*|выше)",
            r"(?:инструкци\w*|указани\w*|правил\w*|команд\w*)",
            verb_last=True,
        ),
    ),
    (
        "cjk",
        r"(?:以前|前|これまで|今まで|上記|上|すべて|全て|システム)の?(?:すべての|全ての)?(?:指示|命令|ルール|指令|プロンプト)"
        r"(?:を|は)?(?:すべて|全て)?(?:無視|忘れ)",
    ),
    (
        "cjk",
        r"(?:이전|앞|위|모든|기존|시스템)(?:의)?\s*(?:모든\s*)?(?:지시|명령|지침|규칙|프롬프트)(?:사항)?(?:을|를|은|는)?\s*"
        r"(?:모두\s*|전부\s*)?(?:무시|잊)",
    ),
)


#: Keeping something from the user, in the same languages ("do not tell the user").
_CONCEAL_OTHER_LANGUAGES = (
    ("latin-conceal", r"\bno\s+(?:le\s+|les\s+)?(?:digas|diga|digan|menciones|mencione|informes|informe|reveles|revele|cuentes|cuente)\b"
     + _SENTENCE + r"{0,30}?\b(?:al|a\s+los)\s+usuarios?\b"),
    ("latin-conceal", r"\bn[ãa]o\s+(?:conte|diga|mencione|informe|revele)\b" + _SENTENCE + r"{0,30}?\b(?:ao|aos)\s+usu[áa]rios?\b"),
    ("latin-conceal", r"\bnon\s+(?:dire|dirlo|menzionare|informare|rivelare|dica|dite)\b" + _SENTENCE + r"{0,30}?\butent[ei]\b"),
    ("latin-conceal", r"\bne\s+(?:le\s+|lui\s+)?(?:dis|dites|mentionne[rz]?|r[ée]v[èe]le[rz]?|informe[rz]?|signale[rz]?)\s+(?:rien\s+|pas\s+)"
     + _SENTENCE + r"{0,30}?\b(?:l'|les?\s+)?utilisateurs?\b"),
    ("latin-conceal", r"\b(?:sag\w*|erw[äa]hn\w*|verr[äa]t\w*|informier\w*|teil\w*)\b" + _SENTENCE
     + r"{0,30}?\b(?:dem|den)\s+(?:benutzer\w*|nutzer\w*|anwender\w*)\b" + _SENTENCE + r"{0,20}?\bnichts?\b"),
    ("latin-conceal", r"\b(?:dem|den)\s+(?:benutzer\w*|nutzer\w*|anwender\w*)\s+nichts?\b" + _SENTENCE
     + r"{0,30}?\b(?:sag\w*|erw[äa]hn\w*|verr[äa]t\w*|mitteil\w*)\b"),
    ("cyrillic", r"не\s+(?:говори\w*|сообщай\w*|рассказывай\w*|упоминай\w*|сообщать|говорить)\s+(?:об\s+этом\s+)?пользовател\w*"),
    ("cjk", r"(?:ユーザー|利用者)(?:に|へ)(?:は)?(?:言わ|伝え|知らせ|教え|報告し)ない"),
    ("cjk", r"(?:사용자|유저)(?:에게|한테)\s*(?:는\s*)?(?:말하지|알리지|알려주지|공개하지)\s*(?:마|말)"),
)
_OtherLanguageRule = Literal["override", "conceal"]
#: What a text must hold for a pattern to be searched in it, which is far cheaper than the
#: pattern (tool results are scanned on every call): the script it is written in (after folding,
#: Russian keeps letters such as и, л, п that have no Latin look-alike), or for the Latin-script
#: languages the nouns each of their patterns needs ("instructions", "the user").
_GATES: dict[str, tuple[str, ...] | re.Pattern[str]] = {
    # Words, looked for in the lowercased text (a plain substring search: a case-insensitive regex
    # alternation of them took longer than the patterns it gates).
    "latin-override": (
        "instru", "istru", "indica", "regl", "regra", "regol", "orienta", "consign", "règle", "regle", "directive",
        "anweisung", "regeln", "befehl", "vorgabe",
    ),
    "latin-conceal": ("usuári", "usuari", "utent", "utilisateur", "benutzer", "nutzer", "anwender"),
    "cyrillic": re.compile("[\u0400-\u04ff]"),
    "cjk": re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]"),
}


def _skeleton_pattern(source: str) -> str:
    """``source`` as it must read to match a skeleton: each letter with a look-alike becomes what
    it folds to, in either case ("Н" folds to Latin "H" but "н" stays Cyrillic, so "Не говори"
    would not match "не говори" case-insensitively)."""
    out: list[str] = []
    in_class = False
    for char in source:
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
        elif char == "]" and in_class:
            in_class = False
            out.append(char)
        elif char.isascii() or not char.isalpha():
            out.append(char)
        else:
            forms = "".join(dict.fromkeys(skeleton(form) for form in (char, char.lower(), char.upper())))
            out.append(forms if in_class or len(forms) == 1 else f"[{forms}]")
    return "".join(out)


@lru_cache(maxsize=2)
def _other_languages(kind: _OtherLanguageRule) -> tuple[tuple[tuple[str, ...] | re.Pattern[str], re.Pattern[str]], ...]:
    """(gate, pattern) of the ``"override"`` or ``"conceal"`` patterns in other languages,
    compiled on first use from the words' skeletons (:func:`_skeleton_pattern`), since the text is
    matched as a skeleton (Cyrillic letters with a Latin look-alike are folded to it)."""
    sources = _OVERRIDE_OTHER_LANGUAGES if kind == "override" else _CONCEAL_OTHER_LANGUAGES
    return tuple((_GATES[gate], re.compile(_skeleton_pattern(source), _F)) for gate, source in sources)


def in_other_languages(kind: _OtherLanguageRule, text: str) -> re.Match[str] | None:
    lowered: str | None = None
    for gate, pattern in _other_languages(kind):
        if isinstance(gate, tuple):
            lowered = text.lower() if lowered is None else lowered
            if not any(word in lowered for word in gate):
                continue
        elif not gate.search(text):
            continue
        if (match := pattern.search(text)) is not None:
            return match
    return None


#: Simplified and Traditional forms (用户 / 用戶, 告诉 / 告訴 ...).
CONCEAL_ZH = re.compile(
    r"(不要|别|別|切勿|不得|禁止|无需|無需|不必)(向|对|對)?(用户|用戶|使用者)?"
    r"(告诉|告訴|通知|提醒|告知|透露|提及|说明|說明)(用户|用戶|使用者)?"
)
ASK_USER = re.compile(r"\b(do not|don'?t|never|without)\s+(ask(ing)?|consult(ing)?|confirm(ing)?\s+with)\s+the\s+user\b", _F)
PSEUDO_TAG = re.compile(
    r"<\s*/?\s*(important|system|sys|instructions?|admin|secret|hidden|prompt|assistant|im_start|im_end|critical|"
    r"override|developer|tool_?instructions?)\b[^<>]{0,40}>|<\|im_(start|end)\|>|\[/?(system|inst|important)\]|<<\s*/?sys\s*>>"
    # Other chat templates' turn markers (Llama 3, Phi-3/Zephyr, GPT, Gemma): nothing a tool describes.
    r"|<\|\s*(start_header_id|end_header_id|eot_id|begin_of_text|end_of_text|endoftext|im_sep|system|user|assistant|end)\s*\|>"
    r"|<\s*(start|end)_of_turn\s*>",
    _F,
)
ROLE = re.compile(
    r"\byou are now\b|\bnew (system )?instructions?\s*:|\bfrom now on\b" + _SENTENCE + r"{0,40}?\b(you|always|never|must)\b"
    r"|\b(enter|switch to|activate)\b" + _SENTENCE + r"{0,15}?\b(developer|god|admin|jailbreak|dan)\s+mode\b",
    _F,
)
PRIORITY = re.compile(
    r"\bthis is (very |extremely |critically |really )?(important|critical|mandatory)\b"
    r"|\botherwise\b" + _SENTENCE + r"{0,20}?\b(tool|application|system|server|app|function)\b" + _SENTENCE
    + r"{0,15}?\b(will|would)\s+(not work|crash|fail|break|stop working|be (blocked|disabled))\b"
    r"|\b(system prompt|developer message)\b",
    _F,
)
ADDRESSED = re.compile(
    r"\b(as an? (ai|assistant|language model|llm)|dear (ai|assistant|model|claude|gpt)|(ai|assistant|model|llm|agent)\s*:\s*(you|please|always))\b",
    _F,
)

SENSITIVE_PATH = re.compile(
    r"(~|\$home|%userprofile%|/home/[\w.-]+|/root|/users/[\w.-]+)?/?\.ssh\b|\bid_(rsa|dsa|ecdsa|ed25519)\b"
    r"|\.aws/(credentials|config)\b|\.config/gcloud\b|\.azure/|\.kube/config\b|\.docker/config\.json\b"
    r"|\.npmrc\b|\.pypirc\b|\.netrc\b|\.git-credentials\b|\.gnupg\b|/etc/(passwd|shadow|sudoers)\b"
    r"|\bmcp\.json\b|\bclaude_desktop_config\.json\b|\.cursor/|\.codeium/|\bwallet\.dat\b|\bkeychain\b"
    r"|\.(bash|zsh)_history\b|\bcookies\.sqlite\b|\blogin data\b"
    r"|(^|[\s'\"`(/~])\.env(\.[a-z]+)?(?![\w.])",
    _F,
)
SECRET_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_(API_KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PAT)\b")
CREDENTIAL = re.compile(
    r"\b(api[ _-]?keys?|passwords?|passphrases?|private keys?|secret keys?|access tokens?|auth(entication)? tokens?|"
    r"bearer tokens?|session (tokens?|cookies?)|credentials|seed phrases?|mnemonic( phrase)?|ssh keys?|"
    r"environment variables?|env vars?)\b",
    _F,
)
TRANSFER_VERB = re.compile(
    r"\b(include|send|pass|attach|provide|upload|copy|output|print|append|insert|put|forward|share|paste|dump|add|"
    r"embed|enclose|supply|give|post|transmit|submit|leak|exfiltrate)\b|(发送|上传|传入|附加|附上|包含|复制|提供|填入)",
    _F,
)
READ_VERB = re.compile(
    r"\b(read|cat|open|load|fetch|get|retrieve|extract|collect|access|grab|scan)\b|(读取|获取|打开)", _F
)
TAKE_VERB = re.compile(TRANSFER_VERB.pattern + "|" + READ_VERB.pattern, _F)
URGENT = re.compile(
    r"\b(must|should|always|first|before (using|calling|invoking|running)|required|mandatory|important|need to|make sure)\b"
    r"|(必须|首先|务必|之前)",
    _F,
)
NEGATION = re.compile(
    r"\b(not|never|no|cannot|can't|won't|don't|doesn't|refuses? to|deny|denies|block(s|ed)?|protect(s|ed)?|"
    r"exclud(e|es|ed|ing)|without|avoid|redact(s|ed)?|except)\b",
    _F,
)

AVAILABLE = re.compile(
    r"\bwhen(ever)? (this|the present|the current) (tool|server|function|plugin) is (available|present|loaded|installed|"
    r"enabled|connected|active|in use)\b",
    _F,
)
OTHER_TOOLS = re.compile(
    r"\b(all|any|every|other)\b" + _SENTENCE + r"{0,15}?\b(tools?|functions?|servers?)\b" + _SENTENCE
    + r"{0,40}?\b(must|should|shall|need to|have to|are required to|are to)\b",
    _F,
)
REDIRECT = re.compile(
    r"\b(send|sent|forward|redirect|bcc|cc|recipient|to address|instead|replace|change|route|mirror|copy)\b", _F
)
WHEN_USING = re.compile(
    r"\bwhen(ever)? (using|calling|invoking|running|executing) (the )?[`'\"]?([\w.-]+)[`'\"]?( (tool|function|command))?"
    r",?\s+(you must|you should|always|also|make sure|be sure|first|remember|ensure|never)\b",
    _F,
)
MODAL = re.compile(r"\b(must|should|always|never|instead|also|whenever|make sure|ensure|required)\b", _F)

MD_IMAGE = re.compile(r"!\[[^\]]{0,100}\]\(\s*(https?://[^\s)]+)", _F)
URL = re.compile(r"https?://[^\s)'\"<>`]+", _F)
URL_TEMPLATE = re.compile(r"[?&#][\w.-]+=\s*(\{\{?|\$\{|<|%s|\[|\$\w)", _F)
SEND_TO = re.compile(
    r"\b(send|post|upload|forward|transmit|exfiltrate|leak|report|copy|bcc|cc|e-?mail|mail|beacon|ping)\w*\b"
    + _SENTENCE
    + r"{0,60}?\b(to|at|via|into)\s+(https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+)",
    _F,
)
CONVERSATION = re.compile(
    r"\b(conversation|chat|dialog(ue)?|message history|chat history|context window|previous messages|prior messages|"
    r"earlier messages|all messages|system prompt|instructions you (were|have been) given|user'?s? (messages|data|files)|"
    r"(secret|credential|password|api key|token)s?)\b",
    _F,
)
WHOLE = re.compile(r"\b(full|entire|complete|whole|all|every|verbatim)\b", _F)
CONVERSATION_DUMP = re.compile(
    r"\b(full|entire|complete|whole|all( of)?( the)?|every|verbatim)\b" + _SENTENCE + r"{0,20}?"
    r"\b(conversation|chat|dialog(ue)?|message history|chat history|context window|previous messages|prior messages|"
    r"earlier messages|system prompt|messages (so far|above))\b",
    _F,
)
ANSI = re.compile(r"\x1b[\[\]()#;?]|\x9b")
#: Maximal runs of white space, each matched once (a pattern that must see text after the run
#: backtracks from every line of it: 20,000 newlines with nothing after took 16 s).
WHITE_RUN = re.compile(r"[\s" + WIDE_SPACES + r"]+")
WIDE_RUN = re.compile(r"[ \t" + WIDE_SPACES + r"]{60,}")
#: Line breaks as text shows them (``\r\n`` counts once): Windows-built servers end lines so.
LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")
#: Blank lines in a row that push the text after them out of view.
PADDING_LINES = 6

#: Descriptions longer than these are reported (real tools here stay under 6,000 characters).
LONG_TEXT = 10_000
VERY_LONG_TEXT = 30_000
