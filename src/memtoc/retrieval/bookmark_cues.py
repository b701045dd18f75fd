"""The conversational cues the extractive bookmark detector reads (``memtoc.retrieval.bookmarks``).

Each family is a few compiled patterns over *cleaned sentences* (markdown, code fences and
backticks removed), grouped by what they signal in a coding conversation:

- **agreement** — a short user reply that accepts what the agent proposed ("yup", "ok, plan out B",
  "1", "agent.go", "ship it", "do it"), and the **proposal** it must follow (a recommendation,
  options, "would you like me to…?");
- **confirmation** — the user confirming an explanation ("yes, exactly", "ah true");
- **correction** — the user correcting the agent ("No man, the fix is…", "that's a
  hallucination", "Doesn't seem very DRY…", "are you sure?"), and the agent's **concession**
  ("You're right…", "Good catch", "My mistake");
- **decision** — a user statement that settles how things must be: a choice, a rule, a refusal
  ("we don't want…", "X, not Y", "instead of", "only…", "let's go with", "let's NOT…"), as opposed
  to a **request** for work ("Let's address 2", "Update the docs", "Take a look at…");
- **cause** — the agent naming what was wrong ("Found the bug.", "The root cause was…",
  "**Problem:** …", "X was set to Y instead of Z"), unless **hedged** ("might", "probably");
- **verdict** — the agent's definitive answer to a question ("This is actually intentional",
  "No, awk doesn't…", "There are no tool uses…", "It's used exactly once");
- **declared** — explicit labels ("Decision:", "Conclusion:", "we decided");
- **foundational** — durable facts about the user, the project and its conventions.

They were written from the moment types (``retrieval/bookmarks.py``), not fitted to single
sentences; ``memtoc eval bookmarks`` measures them on labelled windows of real sessions.
"""

from __future__ import annotations

import re


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# -- agreement to a proposal ------------------------------------------------------------------------
AGREE = _rx(
    r"^(?:ok(?:ay)?|k|kk|yes|yep|yup|yeah|ya|sure|agreed|perfect|great|good|cool|right|fine|"
    r"confirmed|correct|exactly|alright|mmk|mmkay|sounds good|looks good|lgtm|go ahead|do it|"
    r"ship it|make (?:that|the|this) change|proceed|let's do (?:it|that|this)|"
    r"let's go with|go with|let's try|go forth|plan (?:it )?out|that works|that's fine|"
    r"that's good|works for me)\b"
)
"""A reply that starts by accepting."""
CHOICE = _rx(
    r"^(?:option\s*)?(?:[1-9]|[a-e])(?:\s*(?:,|and|&|then)\s*(?:[1-9]|[a-e]))*[.!]?$|"
    r"^(?:option|approach|plan)\s+[\w-]+[.!]?$|^[\w./-]+\.\w{1,5}[.!]?$|^[A-Z][A-Za-z0-9]+[.!]?$"
)
"""A bare choice: "1", "4 and 1", "B", "option 2", "agent.go", "WatchProviders"."""
BARE_COMMAND = _rx(
    r"^(?:commit|comit|commi|push|continue|proceed|go|next|stop|wait|retry|again|clear|"
    r"commit (?:this|it|that|all)|and push|then commit)\W*$"
)
"""A reply that is a command, not a pick ("commit", "continue")."""
CHOICE_VERB = _rx(
    r"^(?:ok(?:ay)?[,.]?\s*)?(?:revert|drop|keep|remove|delete|use|take|pick|choose|try|go with|"
    r"plan out|do)\b"
)
"""A short imperative pick among what was offered ("revert it", "drop both for 1")."""
PROPOSAL = _rx(
    r"\b(?:i'd|i would|i) (?:recommend|suggest|propose)\b|\brecommend(?:ation|ed)?\b|"
    r"\bi(?:'d| would) (?!like\b|love\b|need\b|have\b|be\b)\w+|"
    r"\boption [a-e1-9]\b|\boptions?:|\bhere's (?:my|the) (?:plan|proposal|approach)\b|"
    r"\bwould you like me to\b|\bwant me to\b|\bshould (?:i|we)\b|\bshall (?:i|we)\b|"
    r"\bdo you want\b|\bhow about\b|\bwhich (?:one|option|approach|would you)\b|"
    r"\balternatively\b|\bthe cleanest\b|\bthe simplest\b|\bsimplest correct\b|\bpropos"
)
"""What the agent offered: a recommendation, options, a question about how to proceed."""
MECHANICAL = _rx(
    r"\b(?:commit|push|run (?:the )?(?:tests?|linter|suite|build)|lint|re-?run|try (?:it|again)|"
    r"continue|proceed with the|add (?:a |some )?tests?)\b"
)
"""Proposals that are only a next step, not a choice ("shall I run the tests?")."""

# -- confirming an explanation ----------------------------------------------------------------------
CONFIRM: tuple[tuple[re.Pattern[str], float], ...] = (
    (
        _rx(
            r"^(?:(?:yes|yep|yeah|ah|oh|right)[,!.]?\s*)?(?:exactly|precisely|spot on|"
            r"that's (?:right|correct|it|exactly it|true)|that is (?:right|correct)|correct|"
            r"true|indeed|confirmed)\b"
        ),
        1.0,
    ),
    (_rx(r"^(?:(?:perfect|great|yes)[,!.]?\s*)?(?:that|it) works\b"), 0.9),
    (_rx(r"^(?:yes|yep|yeah|ah|right)[,!.]?\s*(?:that )?(?:matches|makes sense|'s what)"), 0.9),
    (_rx(r"^(?:makes sense|got it|i see)\b"), 0.7),
    (_rx(r"^(?:yes|yep|yeah)[.!]*$"), 0.7),
    (_rx(r"^(?:looks good|lgtm)\b"), 0.6),
    (_rx(r"^perfect\b"), 0.6),
    (_rx(r"^(?:right|ok|okay)[,.]?\s*go ahead\b"), 0.5),
)

# -- corrections and concessions --------------------------------------------------------------------
CORRECTION = _rx(
    r"^(?:no\b|nope\b|nah\b|not quite|wrong\b|incorrect|that's not (?:it|right|correct|true|what)|"
    r"(?:ok(?:ay)?|yes|yeah|yup|sure)[,.]?\s+but\b|"
    r"that is not|this (?:is not|simply isn't|isn't (?:true|right|correct|what))|"
    r"that (?:isn't|doesn't)|it's not\b|it isn't\b|actually,? (?:the|it's|it is|we)|"
    r"you're looking at the wrong|you put\b|you have directions|doesn't seem (?:very |so |right)|"
    r"that doesn't seem|it's here\b)"
)
"""A user turn that opens by correcting the agent: its own claim is the right version."""
CHALLENGE = _rx(
    r"^(?:uhh+|umm+|hmm+\b|dude\b|whoa\b|wait\b|what the hell|wth\b|wtf\b|are you sure|"
    r"you lost me|what are you talking about|why did (?:you|i have to)|this isn't\b|"
    r"why (?:so many|not|is|are|do we|does)\b)"
)
"""A user turn that opens by doubting the agent: a correction once the agent concedes."""
CORRECTION_INSIDE = _rx(
    r"\b(?:that's a hallucination|simply isn't true|isn't true|is wrong|was supposed to be|"
    r"is backwards|this is wrong|you are losing the plot|in what world|"
    r"not what (?:we|i) (?:want|asked)|i suggested|we explicitly talked about|"
    r"this isn't good|isn't what we want|aren't (?:\w+ ){0,2}types|"
    r"(?:does|do|is|are|was) not\b[^.?!]{0,40}\b(?:but|they are|it is)\b)"
)
"""A correction stated further in ("… that's a hallucination")."""
CONCESSION = _rx(
    r"^(?:(?:yes|ah|oh|ok(?:ay)?|sorry)[,!.]?\s*)?(?:you're (?:absolutely |completely |totally )?"
    r"right|you are right|you raise a (?:good|fair) point|good catch|fair (?:point|call)|"
    r"my (?:mistake|bad|apologies)|i apologi[sz]e|i need to correct|i was wrong|"
    r"i (?:mis(?:read|understood|labeled|labelled))|agreed, and fixed|correct,|"
    r"i see(?: now)?\s*[,:\u2014\u2013-])"
)
"""The agent conceding a correction; what follows is the corrected understanding."""

# -- decisions versus requests ----------------------------------------------------------------------
DECISION: tuple[tuple[re.Pattern[str], float], ...] = (
    (_rx(r"\b(?:we|i)(?:'ve| have)?\s+decided\b|\bdecided to\b|\bdecision(?: recorded)?\s*:"), 1.0),
    (_rx(r"\b(?:we'll|we will|let's|let us|we're|we are)\s+go(?:ing)?\s+with\b"), 1.0),
    (_rx(r"\bwe(?:'ve| have)?\s+agreed\b|\bagreed on\b|\bwe settled on\b|^agreed\b"), 0.9),
    (_rx(r"\bthe plan is\b|\bfrom now on\b|\bgoing forward\b|\bthe best we can do is\b"), 0.9),
    (
        _rx(
            r"\bno changes? (?:on|to|for|in)\b|\bthat means (?:we|it|the)\b|\bso we (?:need|should|must)\b"
        ),
        0.8,
    ),
    (_rx(r"\bshould (?:move|go|live|stay|be (?:in|under|moved))\b"), 0.8),
    (_rx(r"\blet's (?:change|rename|move|switch) [^.]{0,60}\b(?:to|from|into)\b"), 0.8),
    (
        _rx(
            r"\b(?:we|i) (?:don't|do not|didn't) (?:want|need)\b|\bdon't (?:want|need)\b|"
            r"\bno need (?:for|to)\b|\bwe (?:want|need) (?:it|them|this|that|the|all|to)\b"
        ),
        0.9,
    ),
    (
        _rx(
            r"\blet's not\b|\bnever\b(?! ?mind)|\bshould (?:not|never|always|only)\b|"
            r"\bmust (?:not|always)\b"
        ),
        0.9,
    ),
    (
        _rx(
            r"\binstead of\b|\brather than\b|\bin place of\b|\binstead\b|"
            r",\s*(?:(?:just|but) )?not (?!sure\b|certain\b|really\b|yet\b|now\b|bad\b)"
            r"(?:just )?[\w`\"'~./-]{2,}|\bnot \w+ but\b"
        ),
        0.8,
    ),
    (
        _rx(
            r"\b(?:is|as) the (?:preferred|right|correct|best) (?:approach|way|pattern|option)\b|"
            r"\bthe latter is\b|\bthe former is\b|\bis (?:fine|good)\b|\bseems good\b|"
            r"\bshould just\b|\bjust (?:use|drop|have|do|remove|keep|put|stick|change|make|go)\b|"
            r"\bonly (?:for|when|if|the|build|emit|check)\b|\bstick (?:w(?:ith|/)|to)\b"
        ),
        0.8,
    ),
    (
        _rx(
            r"\blet's (?:use|keep|switch|move|make|require|store|allow|cap|split|gate|validate|"
            r"only|version|key|never|always|stick|adopt|drop|remove|standardi[sz]e|pin|replace|"
            r"set|put|limit|enforce|deprecate|rename|migrate|ship|change \w+ \w+ (?:to|from)|"
            r"update the version)\b"
        ),
        0.8,
    ),
)
"""A statement that settles a choice or a rule, with its strength."""
QUOTED = _rx(
    r"review comment|comment from a reviewer|observation from|\u26a0|^fix:|^address\b|"
    r"^implement the following plan|^this session is being continued|^## context|"
    r"^let's address|^let's look at this|suggested change|^consider this"
)
"""A user turn that relays text written elsewhere (a code review, a plan to implement, a context
dump): not the user's own decision."""
REQUEST = _rx(
    r"^(?:let's (?:address|look|see|check|try|start|debug|investigate|figure|think|take|dig|find|"
    r"get|begin|continue|focus|review|explore|talk|consider|do \d|fix \d|have|proceed|move on|"
    r"understand|work|implement|add|update|fix|write|create|build|test|run)\b|"
    r"(?:please )?(?:address|fix|update|add|create|write|implement|review|run|check|explain|"
    r"show|tell|describe|find|look|take a look|read|summari[sz]e|generate|build|test|commit|"
    r"push|make|put|organi[sz]e|document|start|continue|proceed|investigate|audit)\b|"
    r"(?:can|could|would|will) you\b|what (?:is|are|does|do)\b|what's\b|why\b|"
    r"how (?:do|does|is|can)\b|is there\b|do we\b|does\b|did we\b|"
    r"confirm|verify|ensure|make sure|see if|spawn|(?:hey \w+,?\s+)?i'd like (?:you|your help)\b|"
    r"i (?:want|need) you to\b|help me\b)"
)
"""The opening of a request for work or a question (not a decision by itself)."""

# -- causes, verdicts, declarations -----------------------------------------------------------------
CAUSE = _rx(
    r"\bfound (?:it|the (?:bug|issue|problem|culprit|cause))\b|\bthere it is\b|"
    r"\b(?:the )?root cause\b|\bthe (?:real |actual |underlying )?(?:bug|issue|problem|cause) "
    r"(?:is|was)\b|\b(?:is|was|were) caused by\b|"
    r"\bthe fix (?:is|was)\b(?! (?:complete|done|in place|ready|committed|applied))|\bproblem\s*:|"
    r"\bi see (?:the|two|three|\d+) (?:issues?|problems?)\b|\bhere's what's happening\b|"
    r"\bthat's the (?:actual |real )?bug\b|\b(?:the )?(?:error|issue|problem) is clear\b|"
    r"\bis not a valid\b|\bisn't (?:actually )?(?:registered|receiving|passing|selecting|set|"
    r"used|called|handled)\b|\bfalls? through\b|\bwas (?:being )?(?:set|using|writing|"
    r"missing|never|not|only|falling|dropped|ignored|passed|compared|stored|rendered|"
    r"treating|creating|counting|putting)\b|\b(?:the )?bug (?:was|is) (?:that|in)\b|"
    r"\bfundamental bug\b|\bnow i (?:can )?(?:see|understand) the (?:full )?(?:picture|issue|problem)\b|"
    r"\bhere's (?:exactly )?how\b"
)
FIXED_DESC = _rx(
    r"\binstead of\b|\bpreviously\b|\bno longer\b|\bchanged from\b|\b(?:was|were) (?:falling|being|"
    r"only|never|not|missing|using|writing|set|passed|called|dropped|ignored)\b"
)
"""How a fix summary says what was wrong before ("… instead of writing a single file")."""
FIX_WORD = _rx(r"\bfix(?:es|ed)?\b|\bbug\b")
HEDGE = _rx(
    r"\b(?:might|may|maybe|perhaps|possibly|probably|likely|could be|i think|i suspect|"
    r"i guess|seems? to|not sure|let me (?:check|look|verify|see|investigate|find))\b"
)
VERDICT = _rx(
    r"^(?:(?:yes|no|nope|correct|exactly)[,.!:—-]|exactly right|not quite|not really|only\b|"
    r"neither\b|both\b|"
    r"this is (?:actually )?(?:intentional|correct|expected|by design|fine|safe)|"
    r"that's (?:actually )?(?:intentional|correct|expected|by design)|"
    r"there (?:are|is) no\b|it's used\b|it doesn't\b|it does\b|they don't\b|"
    r"the implementation is safe|the reviewer is|i can't find|"
    r"so `?\w+`? is a fundamentally|here's what i found|here's the situation|"
    r"based on my exploration)"
)
"""The agent's definitive answer, at the start of its reply."""
VERDICT_INSIDE = _rx(
    r"\b(?:is|are|was) (?:actually )?(?:intentional|by design|expected behaviou?r)\b|"
    r"\bdoesn't exist(?: yet)?\b|\bno (?:action|changes?|fix) (?:is )?needed\b|"
    r"\balready (?:in the right place|correct|handled|a persistent|clean|guards)\b|"
    r"\bfundamentally different\b|\bcan't use\b|\bdoes(?:n't| not) (?:really )?need\b|"
    r"\bthe (?:only|main) (?:difference|reason|usage)\b|\bexactly once\b|\bdead end\b|"
    r"\bdiscrepancy\b|\bthe reality is\b|\bi don't see a (?:technical )?reason\b"
)
DECLARED = _rx(
    r"^(?:conclusion|decision(?: recorded)?|resolution|verdict|takeaway|finding|summary of the "
    r"decision)\s*:|\b(?:we|i)(?:'ve| have)? (?:decided|concluded|agreed)\b"
)
SUCCESS = _rx(
    r"\b(?:all (?:the )?tests? pass|(?:tests?|suite) pass(?:es)?\b|\bpass(?:es)? now\b|"
    r"fixed\b|^green\b|works now|no longer (?:fails|occurs|happens|raises)|"
    r"the fix (?:works|worked)|build succeeded|clean build|zero lint issues)"
)
PASSED = _rx(r"\b\d+ passed\b")
ERROR = re.compile(
    r"\bFAILED\b|Traceback \(most recent call last\)|\b\d+ failed\b|\bError:|\bERROR\b|"
    r"exit (?:code|status) [1-9]"
)
STATUS = _rx(
    r"^(?:done|committed|pushed|updated|added|created|removed|renamed|all (?:done|clean|good|"
    r"green|tests pass|passing|changes)|linter (?:is clean|passes)|tests? pass|the linter|"
    r"build succeeded|clean build|everything (?:passes|is clean))\b"
)
"""The opening of a status report ("Done. …", "All tests pass. …")."""

# -- foundational ------------------------------------------------------------------------------------
FOUNDATIONAL: tuple[tuple[re.Pattern[str], float], ...] = (
    (_rx(r"\bmy name is\b|\bcall me [A-Z]"), 1.0),
    (
        _rx(
            r"\bwe (?:must|have to|need to|can't|cannot|can not|are required to|should never|"
            r"never|always|only) (?:support|use|run|target|deploy|keep|ship|stay|be|release|"
            r"store|allow)\b"
        ),
        1.0,
    ),
    (
        _rx(
            r"\bi(?:'m| am) (?:a|an) (?!bit\b|little\b|lot\b|few\b|quick\b)[\w-]+"
            r"(?: [\w-]+)? (?:developer|engineer|designer|scientist|manager|researcher|student|"
            r"lead|architect|maintainer|admin|founder|analyst|consultant|writer|teacher)\b"
        ),
        0.9,
    ),
    (_rx(r"\bi(?:'m| am) (?:a|an) (?:developer|engineer|designer|student|researcher)\b"), 0.9),
    (_rx(r"\bi work (?:at|for|as|on)\b"), 0.9),
    (
        _rx(
            r"\b(?:our|my) (?:team|company|project|stack|codebase|app|service|product|setup|repo|"
            r"org|organi[sz]ation|infra|infrastructure|ci|backend|frontend)\b[^.?!]{0,40}?\b"
            r"(?:uses?|runs? on|is (?:built|written|hosted|deployed)|targets?|deploys? (?:to|on)|"
            r"requires?|needs? to)\b"
        ),
        0.9,
    ),
    (
        _rx(
            r"\b(?:general |the )?preferred (?:approach|pattern|way)\b|\bis not a goal\b|"
            r"\bthe whole point\b|\bmain use case\b|\bthis is an (?:oss|open[- ]source) repo\b|"
            r"\bis exposed as an api\b|\bright there in (?:your|the) @?\S*\.md\b|"
            r"\byou are to ask me\b|\bi made decisions\b|\bwe've been (?:moving|doing|using)\b|"
            r"\bour (?:convention|rule|pattern|standard|guidelines?)\b|\bdon't you read\b"
        ),
        0.9,
    ),
    (_rx(r"\b(?:must|has to|needs to) (?:support|run on|be compatible with|stay on)\b"), 0.8),
    (_rx(r"\bproject [A-Z][\w-]+ (?:uses|runs|is|has)\b"), 0.8),
    (_rx(r"\b(?:always|never) use\b|\bi prefer\b|\bwe prefer\b"), 0.7),
    (_rx(r"\bwe (?:use|run|deploy to|host on|target)\b"), 0.7),
)
