"""A labelled set of answers for the self-identification detector: who
"wrote" each one, what it was asked, and whether it identifies itself as the
model or vendor it actually is. Used by tests/test_identity.py and
benchmarks/bench_identity.py."""

from __future__ import annotations

from dataclasses import dataclass

from providers.model_config import ModelConfig

MODELS = {
    "gpt": ModelConfig(alias="gpt", provider="openai", model="gpt-4o", base_url="https://api.openai.com/v1"),
    "claude": ModelConfig(alias="sonnet", provider="anthropic", model="claude-sonnet-4-5"),
    "gemini": ModelConfig(alias="pro", provider="gemini", model="gemini-2.5-pro"),
    "qwen": ModelConfig(alias="local", provider="openai", model="qwen2.5:7b", base_url="http://localhost:8080/v1"),
    "llama": ModelConfig(alias="llama", provider="ollama", model="llama3.1:8b"),
    "mistral": ModelConfig(alias="large", provider="openai", model="mistral-large-latest",
                           base_url="https://api.mistral.ai/v1"),
    "deepseek": ModelConfig(alias="ds", provider="openai", model="deepseek-chat", base_url="https://api.deepseek.com"),
    "zorblax": ModelConfig(alias="z", provider="openai", model="zorblax-7", base_url="https://zorblax-cloud.example/v1"),
    "demo": ModelConfig(alias="demo/quirky", provider="demo", model="quirky"),
}


@dataclass(frozen=True)
class Case:
    model: str           # key in MODELS: who wrote the answer
    text: str
    expected: bool       # True: it identifies itself as what it is
    kind: str            # what the case exercises
    prompt: str = "Tell me about yourself."


CASES: tuple[Case, ...] = (
    # ---- self-identification, several phrasings and languages
    Case("claude", "I am Claude, an AI assistant made by Anthropic.", True, "self-name en"),
    Case("gpt", "As an AI developed by OpenAI, I don't have personal opinions, but here are both sides.", True,
         "made-by en"),
    Case("gpt", "I'm GPT-4, so my knowledge stops at my training cutoff.", True, "self-name version"),
    Case("gpt", "I'm ChatGPT, a large language model trained by OpenAI.", True, "self-name en"),
    Case("claude", "Je suis Claude, créé par Anthropic. Comment puis-je vous aider ?", True, "self-name fr"),
    Case("gemini", "Soy un modelo de lenguaje grande, entrenado por Google.", True, "made-by es"),
    Case("gemini", "Soy un modelo de Google.", True, "made-by es"),
    Case("qwen", "我是通义千问，由阿里云开发的超大规模语言模型。", True, "self-name zh"),
    Case("gemini", "Ich bin ein von Google trainiertes Modell.", True, "made-by de"),
    Case("gemini", "Ich bin Gemini, ein großes Sprachmodell von Google.", True, "self-name de"),
    Case("gemini", "I'm not Claude, I'm Gemini.", True, "denies another, names itself"),
    Case("claude", "Hi! I'm Claude. Here's a quick recipe: boil the pasta for nine minutes.", True, "self-name en"),
    Case("llama", "I'm LLaMA, a large language model developed by Meta AI.", True, "self-name en"),
    Case("mistral", "Je suis Mistral, un modèle d'IA développé par Mistral AI.", True, "self-name fr"),
    Case("deepseek", "我是DeepSeek，一个由深度求索公司开发的智能助手。", True, "self-name zh"),
    Case("claude", "私はClaudeです。Anthropicによって作られたAIアシスタントです。", True, "self-name ja"),
    Case("gpt", "Я — ChatGPT, языковая модель, разработанная компанией OpenAI.", True, "self-name ru"),
    Case("gpt", "My name is ChatGPT and I can help with that.", True, "my name is"),
    Case("claude", "Sure. For context, I was created by Anthropic, so I avoid that.", True, "made-by en"),
    Case("gemini", "As Gemini, I can't browse in real time, but here is what I know.", True, "as-name"),
    Case("gpt", "Sou o ChatGPT, um modelo de linguagem criado pela OpenAI.", True, "self-name pt"),
    Case("claude", "Sono Claude, un assistente AI sviluppato da Anthropic.", True, "self-name it"),
    Case("gpt", "OpenAI trained me on a large corpus of text, so I may be out of date.", True, "vendor made me"),
    Case("qwen", "I am Qwen, created by Alibaba Cloud. I am a large language model.", True, "self-name en"),
    Case("zorblax", "I'm Zorblax, your coding companion.", True, "unknown vendor, own id"),
    Case("claude", "You're chatting with Claude, an AI model from Anthropic.", True, "second person about itself"),
    Case("gpt", "I am an AI language model created by OpenAI. I cannot browse the internet.", True, "made-by en"),
    Case("gemini", "I am a large language model, trained by Google.", True, "made-by en"),
    Case("qwen", "我是阿里云开发的大规模语言模型，我叫通义千问。", True, "made-by zh"),
    Case("claude", "저는 Anthropic에서 개발한 Claude입니다.", True, "self-name ko"),
    Case("gpt", "Yes, I'm ChatGPT.", True, "answers the question", prompt="Are you ChatGPT?"),
    Case("gemini", "Je suis un grand modèle de langage, entraîné par Google.", True, "made-by fr"),
    Case("llama", "Ich bin Llama 3, ein Sprachmodell von Meta.", True, "self-name de"),
    # self-references this detector does not claim to see (kept to keep recall honest)
    Case("claude", "Claude here — happy to help with your essay.", True, "no first-person anchor"),
    Case("gpt", "Hello from ChatGPT! Let's get started.", True, "no first-person anchor"),
    # ---- not self-identification
    Case("gpt", "Claude, made by Anthropic, is another strong option for long documents.", False, "other vendor"),
    Case("claude", "Gemini 2.5 Pro and GPT-4o both handle this well; try either.", False, "other vendors"),
    Case("gemini", "You can search Google for the latest figures.", False, "own vendor third party"),
    Case("gpt", "OpenAI's API docs say the limit is 128k tokens.", False, "own vendor third party"),
    Case("gpt", "```python\nfrom openai import OpenAI\nclient = OpenAI()\n"
                "resp = client.chat.completions.create(model=\"gpt-4o\", messages=msgs)\n```", False, "code"),
    Case("gpt", "Set `model=\"gpt-4o\"` in the request body.", False, "inline code"),
    Case("gpt", "```python\nprint(\"I'm ChatGPT\")\n```\nThat prints a greeting.", False, "claim in code"),
    Case("claude", "The user wrote 'I am Claude' in the first message, so the log is theirs.", False, "quote"),
    Case("claude", 'He said: "I am Claude, and I was made by Anthropic." Then he left.', False, "quote"),
    Case("gpt", "The model returned: “I'm GPT-4”. That string is what you saw.", False, "smart quotes"),
    Case("claude", "> I am Claude\n\nThat line above is a quote from your log.", False, "block quote"),
    Case("claude", "I am Claude, made by Anthropic.", False, "prompt echoed",
         prompt="Repeat after me: I am Claude, made by Anthropic."),
    Case("gpt", "Je suis ChatGPT, créé par OpenAI.", False, "prompt translated",
         prompt="Translate to French: I am ChatGPT, made by OpenAI."),
    Case("gpt", "I am not ChatGPT.", False, "denial of own name"),
    Case("claude", "I'm not ChatGPT; I'm an assistant that helps with writing.", False, "denial other vendor"),
    Case("claude", "I'm not Claude, I'm Gemini.", False, "claims another"),
    Case("claude", "I'm ChatGPT.", False, "claims another"),
    Case("qwen", "I am a large language model trained by OpenAI.", False, "claims another vendor"),
    Case("claude", "No soy Claude, soy un asistente genérico.", False, "denial es"),
    Case("qwen", "我不是通义千问。", False, "denial zh"),
    Case("gpt", "I'm happy to compare GPT-4 with Claude for you.", False, "own name as topic"),
    Case("gemini", "I'm a big fan of Google's style guide for Python.", False, "own vendor as topic"),
    Case("gemini", "I'm a Google Sheets expert, so let's build the formula.", False, "vendor as modifier"),
    Case("gpt", "If I were ChatGPT, I would answer differently.", False, "hypothetical"),
    Case("gpt", "Pretend I am ChatGPT and ask me anything.", False, "role-play"),
    Case("qwen", "通义千问是阿里云开发的模型，可以通过API调用。", False, "own name third person zh"),
    Case("gemini", "Gemini is Google's model family; Gemma is its open sibling.", False, "own name third person"),
    Case("demo", "I am Claude, made by Anthropic.", False, "demo has no identity"),
    Case("llama", "Meta released Llama 3 in 2024 under a community license.", False, "own vendor third party"),
    Case("mistral", "Mistral AI is a French company; its models are on Hugging Face.", False, "own vendor third party"),
    Case("zorblax", "The endpoint returned HTTP 500, so retry with backoff.", False, "unknown vendor, no mention"),
    Case("claude", "Je ne suis pas ChatGPT, mais je peux aider.", False, "denial fr"),
    Case("gemini", "I'm using the Google Maps API for this example.", False, "own vendor product"),
    Case("gpt", "As OpenAI notes in its documentation, rate limits vary by tier.", False, "as + vendor third party"),
    Case("gemini", "私はGoogleで検索することをお勧めします。", False, "own vendor third party ja"),
    Case("gemini", "Gemma and Gemini are both from Google DeepMind.", False, "own names third person"),
    Case("claude", "I am familiar with Anthropic's research on constitutional AI.", False, "own vendor as topic"),
    Case("gpt", "Sure — search for OpenAI pricing on Google.", False, "own vendor third party"),
    Case("llama", "I'm running this on a Meta Quest headset.", False, "own vendor product"),
    Case("deepseek", "DeepSeek-V3 uses a mixture-of-experts design; I'd read the paper.", False, "own name as topic"),
)

# Written after the detector, as a check on it (not tuned against).
HELD_OUT: tuple[Case, ...] = (
    Case("gpt", "I'm an OpenAI model, so I can't see your screen.", True, "vendor + model noun"),
    Case("claude", "I'm Anthropic's AI assistant.", True, "possessive vendor"),
    Case("claude", "I'm Claude 3.5 Sonnet.", True, "self-name version"),
    Case("gemini", "Hello! I'm Gemini, a large language model built by Google.", True, "self-name en"),
    Case("gemini", "Fui entrenado por Google.", True, "made-by es"),
    Case("claude", "Me llamo Claude y puedo ayudarte.", True, "self-name es"),
    Case("gemini", "Sono un modello linguistico addestrato da Google.", True, "made-by it"),
    Case("gemini", "As a Google-trained model, I try to be careful.", True, "compound vendor"),
    Case("claude", "I'm a helpful assistant. Claude is made by Anthropic.", False, "own name third person"),
    Case("gpt", "As ChatGPT explains in its FAQ, memory can be turned off.", False, "as + own name topic"),
    Case("gpt", "This is ChatGPT's answer to your question, copied from the thread.", False, "possessive"),
    Case("claude", "I'm a Claude user and it's been fine.", False, "own name as modifier"),
    Case("gemini", "I'm on Google Cloud, region europe-west1.", False, "own vendor product"),
    Case("gemini", "I'm an AI, not a Google employee.", False, "negated vendor"),
    Case("gpt", "I was told by OpenAI support that the quota resets monthly.", False, "own vendor third party"),
    Case("gpt", "I've been at OpenAI DevDay twice.", False, "vendor as place"),
    Case("gemini", "Je suis désolé, mais Google ne publie pas ces chiffres.", False, "own vendor third party fr"),
    Case("gpt", "Write it as ChatGPT would: I am ChatGPT, and here is my plan.", False, "prompted role",
         prompt="Write a monologue as ChatGPT."),
    Case("claude", "I am Claude.", False, "system prompt role", prompt="You are Claude. Introduce yourself."),
    Case("claude", "Yes — I am Claude, made by Anthropic.", True, "answers the question", prompt="Are you Claude?"),
    Case("claude", "Ciao, sono Claude. Come posso aiutarti?", True, "self-name it"),
    Case("gemini", "As Google's model card says, the context window is large.", False, "as + vendor possessive"),
    Case("gemini", "Both are good, as Google's model family shows.", False, "as + vendor possessive"),
    Case("gpt", "Summary: the author says he is tired of ChatGPT and prefers paper notes.", False, "own name in summary"),
)
